// `kiln train`: builds a catalog model from its name and config, trains it on Fashion-MNIST
// with a progress bar, evaluates it, and saves a safetensors checkpoint whose metadata holds
// the model name and config, so `kiln eval --checkpoint FILE` can rebuild it alone.
//
// `--nproc N` trains data-parallel: the command starts itself N times under kiln launch;
// every rank trains a DistributedDataParallel copy on its DistributedSampler shard with
// batch-size / N samples per step (so the global batch is --batch-size, as in one process),
// and rank 0 alone prints progress, evaluates and writes the checkpoint. With --device cuda
// each rank trains on its own GPU, cuda:<local rank>, and the ranks reduce over NCCL.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/cuda/device.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"
#include "kiln/models/saved_model.h"
#include "kiln/models/training.h"
#include "kiln/serialize/durable_files.h"

namespace kiln::cli {

namespace {

// The arguments without --nproc (and its value): what each rank runs.
std::vector<std::string> without_nproc(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == "--nproc") {
      ++i;
      continue;
    }
    if (raw[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(raw[i]);
  }
  return out;
}

// Starts this command as `nproc` ranks and returns the job's exit status.
int launch_ranks(const std::vector<std::string>& raw, int nproc) {
  distributed::LaunchOptions launch;
  launch.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "train"};
  for (const std::string& a : without_nproc(raw)) launch.command.push_back(a);
  launch.nproc_per_node = nproc;
  distributed::LaunchResult result = distributed::launch(launch);
  if (result.exit_code != 0) std::cerr << "kiln train: " << result.message << "\n";
  return result.exit_code;
}

}  // namespace

int run_train(const std::vector<std::string>& raw) {
  Args args(command_spec("train"), raw);
  const int nproc = static_cast<int>(args.integer("nproc", 1));
  const char* world_env = std::getenv("KILN_WORLD_SIZE");
  const int64_t global_batch = args.integer("batch-size", 128);
  auto check_batch_splits = [&](int world) {
    KILN_CHECK(global_batch % world == 0, "--batch-size ", global_batch, " is the global batch and must split "
               "evenly over ", world, " ranks. Fix: pass a multiple of ", world, ".");
  };
  const std::string device_spec = args.str("device", "cpu");
  if (nproc > 1 && !world_env) {
    check_batch_splits(nproc);  // before starting anything
    KILN_CHECK(device_spec.rfind("cuda:", 0) != 0, "--device ", device_spec, " with --nproc ", nproc, ": each rank "
               "trains on its own GPU, cuda:<its local rank>. Fix: pass --device cuda.");
    return launch_ranks(raw, nproc);
  }
  const bool data_parallel = world_env && std::atoi(world_env) > 1;
  Device device = device_option(args);
  if (data_parallel && device.is_cuda())
    device = cuda::device(static_cast<int16_t>(distributed::local_rank() % cuda::device_count()));
  if (data_parallel) distributed::init({.backend = device.is_cuda() ? "nccl" : "gloo"});
  const int rank = distributed::rank(), world = distributed::world_size();
  check_batch_splits(world);
  const bool chief = rank == 0;  // prints, evaluates and saves
  const std::string name = model_option(args);
  const json::Value config = resolved_config(name, args, /*for_training=*/true);
  const uint64_t seed = static_cast<uint64_t>(args.integer("seed", 0));
  data::DistributedSampler sampler({.num_replicas = world, .rank = rank, .shuffle = true, .seed = seed});
  // Each rank draws its own dropout masks (seed + rank); the sampler's order is shared.
  const models::FitOptions fit_options{.epochs = static_cast<int>(args.integer("epochs", 5)),
                                       .batch_size = global_batch / world,
                                       .seed = seed + static_cast<uint64_t>(rank),
                                       .sampler = data_parallel ? &sampler : nullptr};
  const double lr = args.number("lr", 1e-3);
  const double weight_decay = args.number("weight-decay", 0.0);

  // A --save path that cannot be written fails now, not after the training it would lose.
  if (args.has("save")) durable::check_writable_file(args.str("save", ""), "--save");

  manual_seed(seed);
  std::shared_ptr<nn::Module> model = models::build_model(name, config);
  model->to(device);  // the batches follow the model (models::fit)
  if (chief) std::cout << "model " << name << " " << json::dump(config) << "\n";
  models::ClassificationData data = models::load_classification_data(
      "", args.integer("max-train", 0), args.integer("max-test", 0));
  if (chief)
    std::cout << "training on " << data.train_images.size(0) << " images, " << fit_options.epochs
              << " epochs, batch " << global_batch
              << (data_parallel ? " (" + std::to_string(fit_options.batch_size) + " on each of " +
                                      std::to_string(world) + " ranks)"
                                : std::string())
              << ", " << (weight_decay > 0 ? "AdamW" : "Adam") << " lr " << lr << " (cosine decay)"
              << (weight_decay > 0 ? ", weight decay " + std::to_string(weight_decay) : "") << ", "
              << (device.is_cpu()    ? std::to_string(num_threads()) + " threads"
                  : data_parallel ? "a GPU (nccl)"
                                  : "on " + device.str())
              << (data_parallel ? " per rank" : "") << "\n";
  std::shared_ptr<nn::Module> trained = model;
  if (data_parallel) trained = std::make_shared<distributed::DistributedDataParallel>(model);
  models::train_classifier(*trained, data.train_images, data.train_labels,
                           {.fit = fit_options, .lr = lr, .weight_decay = weight_decay},
                           chief ? models::progress_bar(isatty(fileno(stdout)) != 0) : models::FitCallback());
  if (!chief) {
    distributed::destroy();
    return 0;
  }
  const double accuracy = models::evaluate(*model, data.test_images, data.test_labels);
  std::printf("test accuracy: %.4f\n", accuracy);
  if (args.has("save")) {
    const std::string path = args.str("save", "");
    models::save_model(*model, name, config, path, {{"test_accuracy", std::to_string(accuracy)}});
    std::cout << "saved " << path << "\n";
  }
  if (data_parallel) distributed::destroy();
  return 0;
}

}  // namespace kiln::cli
