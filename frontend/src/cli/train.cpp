// `kiln train`: builds a catalog model from its name and config, trains it on Fashion-MNIST
// with a progress bar, evaluates it, and saves a safetensors checkpoint whose metadata holds
// the model name and config, so `kiln eval --checkpoint FILE` can rebuild it alone.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"
#include "kiln/models/saved_model.h"
#include "kiln/models/training.h"
#include "kiln/serialize/durable_files.h"

namespace kiln::cli {

int run_train(const std::vector<std::string>& raw) {
  Args args(command_spec("train"), raw);
  const std::string name = model_option(args);
  const json::Value config = resolved_config(name, args, /*for_training=*/true);
  const uint64_t seed = static_cast<uint64_t>(args.integer("seed", 0));
  const models::FitOptions fit_options{.epochs = static_cast<int>(args.integer("epochs", 5)),
                                       .batch_size = args.integer("batch-size", 128),
                                       .seed = seed};
  const double lr = args.number("lr", 1e-3);
  const double weight_decay = args.number("weight-decay", 0.0);

  const Device device = device_option(args);
  // A --save path that cannot be written fails now, not after the training it would lose.
  if (args.has("save")) durable::check_writable_file(args.str("save", ""), "--save");

  manual_seed(seed);
  std::shared_ptr<nn::Module> model = models::build_model(name, config);
  model->to(device);  // the batches follow the model (models::fit)
  std::cout << "model " << name << " " << json::dump(config) << "\n";
  models::ClassificationData data = models::load_classification_data(
      "", args.integer("max-train", 0), args.integer("max-test", 0));
  std::cout << "training on " << data.train_images.size(0) << " images, " << fit_options.epochs
            << " epochs, batch " << fit_options.batch_size << ", "
            << (weight_decay > 0 ? "AdamW" : "Adam") << " lr " << lr << " (cosine decay)"
            << (weight_decay > 0 ? ", weight decay " + std::to_string(weight_decay) : "") << ", "
            << (device.is_cpu() ? std::to_string(num_threads()) + " threads" : "on " + device.str()) << "\n";
  models::train_classifier(*model, data.train_images, data.train_labels,
                           {.fit = fit_options, .lr = lr, .weight_decay = weight_decay},
                           models::progress_bar(isatty(fileno(stdout)) != 0));
  const double accuracy = models::evaluate(*model, data.test_images, data.test_labels);
  std::printf("test accuracy: %.4f\n", accuracy);
  if (args.has("save")) {
    const std::string path = args.str("save", "");
    models::save_model(*model, name, config, path, {{"test_accuracy", std::to_string(accuracy)}});
    std::cout << "saved " << path << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
