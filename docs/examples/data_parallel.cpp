// Data-parallel training in one file (docs/distributed.md quotes it): run alone, the program
// starts itself as 2 ranks through kiln::distributed::launch, the way `kiln launch --nproc 2
// -- ./example_data_parallel` would. Each rank trains a DistributedDataParallel copy of a
// small classifier on its DistributedSampler shard of synthetic data; rank 0 saves the
// checkpoint. Every rank checks that its weights equal rank 0's bit for bit.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "example_checks.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"

namespace nn = kiln::nn;
namespace F = kiln::nn::functional;
namespace dist = kiln::distributed;
using kiln::Tensor;

struct Classifier : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 32));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 3));
  Tensor forward(const Tensor& x) override { return fc2(fc1(x).relu()); }
};

int train_as_one_rank(const std::string& checkpoint) {
  dist::init();  // KILN_RANK, KILN_WORLD_SIZE, KILN_MASTER_ADDR/PORT from the launcher
  const int rank = dist::rank();

  // The same data on every rank (three blobs); the sampler gives each rank its own half.
  kiln::manual_seed(0);
  Tensor labels = kiln::randint(0, 3, {600});
  Tensor points = kiln::randn({600, 2}) * 0.5 + labels.to(kiln::kFloat32).unsqueeze(1) * 2.0;

  auto model = std::make_shared<Classifier>();  // rank 0's weights are copied to every rank
  dist::DistributedDataParallel ddp(model);
  kiln::optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  kiln::data::DistributedSampler sampler({.seed = 1});
  kiln::data::DataLoader loader(points, labels, {.batch_size = 32, .shuffle = false, .sampler = &sampler});

  float loss_value = 0;
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (auto [x, y] : loader) {
      Tensor loss = F::cross_entropy(ddp(x), y);
      opt.zero_grad();
      loss.backward();  // gradients are averaged over the ranks here
      opt.step();
      loss_value = loss.item<float>();
    }
  }
  // Identical weights on every rank: gather each rank's fc2.weight and compare with rank 0's.
  std::vector<Tensor> all(dist::world_size());
  for (Tensor& t : all) t = kiln::zeros({3, 32});
  dist::all_gather(all, model->fc2->weight.detach().contiguous());
  check(all[rank].to_vector<float>() == all[0].to_vector<float>(), "rank " + std::to_string(rank) + " has rank 0's weights");
  if (rank == 0) {
    kiln::save(*model, checkpoint);  // written to a temporary file, then renamed
    std::cout << "rank 0: last loss " << loss_value << ", saved " << checkpoint << "\n";
  }
  dist::destroy();
  return finish(("data_parallel rank " + std::to_string(rank)).c_str());
}

int main() {
  std::string checkpoint = (std::filesystem::temp_directory_path() /
                            ("kiln_data_parallel_" + std::to_string(getpid()) + ".safetensors")).string();
  if (std::getenv("KILN_RANK")) {
    // A rank: of the job below, or of one `kiln launch` started (then the file is temporary).
    const char* given = std::getenv("KILN_CHECKPOINT");
    int status = train_as_one_rank(given ? given : checkpoint);
    if (!given) std::filesystem::remove(checkpoint);
    return status;
  }
  // Not a rank yet: start two, as kiln launch does.
  dist::LaunchOptions launch;
  launch.command = {std::filesystem::read_symlink("/proc/self/exe").string()};
  launch.nproc_per_node = 2;
  launch.env = {{"KILN_CHECKPOINT", checkpoint}, {"KILN_NUM_THREADS", "1"}};
  dist::LaunchResult result = dist::launch(launch);
  check(result.exit_code == 0, "both ranks succeeded: " + result.message);
  check(std::filesystem::exists(checkpoint), "rank 0 wrote the checkpoint");
  std::filesystem::remove(checkpoint);
  return finish("data_parallel");
}
