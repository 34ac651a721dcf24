// `kiln demo`: the main job. Builds FashionMLP from its config, prints its tree and summary,
// trains it on Fashion-MNIST, saves a checkpoint, rebuilds the model from that file alone and
// checks that the reloaded model scores exactly the same test accuracy.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"
#include "kiln/models/saved_model.h"
#include "kiln/models/training.h"
#include "kiln/nn/summary.h"

namespace kiln::cli {

int run_demo(const std::vector<std::string>& raw) {
  Args args("demo", raw, {"epochs", "batch", "lr", "seed", "save"});
  const models::FitOptions fit_options{.epochs = static_cast<int>(args.positive("epochs", 10)),
                                       .batch_size = args.positive("batch", 128),
                                       .seed = static_cast<uint64_t>(args.integer("seed", 0))};
  const double lr = args.number("lr", 1e-3);
  KILN_CHECK(lr > 0, "--lr must be positive, got ", lr, ".");
  const std::string path =
      args.str("save", (std::filesystem::temp_directory_path() / "kiln-demo.safetensors").string());

  manual_seed(fit_options.seed);
  const json::Value config = models::resolve_config("fashion_mlp");
  std::shared_ptr<nn::Module> model = models::build_model("fashion_mlp", config);
  std::cout << "FashionMLP " << json::dump(config) << "\n\n"
            << *model << "\n\n"
            << nn::summary(*model, {{-1, 1, 28, 28}}) << "\n";

  models::ClassificationData data = models::load_classification_data();
  std::cout << "training on " << data.train_images.size(0) << " images: " << fit_options.epochs
            << " epochs, batch " << fit_options.batch_size << ", Adam lr " << lr
            << " with cosine decay, " << num_threads() << " threads\n";
  models::train_classifier(*model, data.train_images, data.train_labels,
                           {.fit = fit_options, .lr = lr},
                           models::progress_bar(isatty(fileno(stdout)) != 0));
  const double accuracy = models::evaluate(*model, data.test_images, data.test_labels);
  std::printf("test accuracy: %.4f\n", accuracy);

  models::save_model(*model, "fashion_mlp", config, path);
  models::SavedModel reloaded = models::load_model(path);
  const double reloaded_accuracy =
      models::evaluate(*reloaded.model, data.test_images, data.test_labels);
  std::printf("saved %s, rebuilt %s from it: test accuracy %.4f (%s)\n", path.c_str(),
              reloaded.name.c_str(), reloaded_accuracy,
              reloaded_accuracy == accuracy ? "identical" : "DIFFERENT");
  return reloaded_accuracy == accuracy ? 0 : 1;
}

}  // namespace kiln::cli
