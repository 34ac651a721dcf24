// `kiln eval --checkpoint FILE [--check-finite]`: rebuilds the model from the name and config
// stored in the checkpoint alone, loads its weights (verified against their stored digests),
// optionally checks that they are finite, and prints the test accuracy — exactly the figure
// `kiln train` printed, because evaluation is deterministic.
#include <cstdio>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/saved_model.h"
#include "kiln/models/training.h"
#include "kiln/nn/utils.h"

namespace kiln::cli {

int run_eval(const std::vector<std::string>& raw) {
  Args args(command_spec("eval"), raw);
  KILN_CHECK(args.has("checkpoint"),
             "--checkpoint FILE is required (a file written "
             "by `kiln train --save FILE`).");
  const Device device = device_option(args);
  models::SavedModel saved = models::load_model(args.str("checkpoint", ""));
  saved.model->to(device);  // the test batches follow the model (models::evaluate)
  std::cout << "model " << saved.name << " " << json::dump(saved.config) << "\n";
  if (args.has("check-finite")) {
    nn::check_finite(*saved.model);
    std::cout << "weights: all finite\n";
  }
  models::ClassificationData data = models::load_test_data("", args.integer("max-test", 0));
  const double accuracy = models::evaluate(*saved.model, data.test_images, data.test_labels);
  std::printf("test accuracy: %.4f\n", accuracy);
  return 0;
}

}  // namespace kiln::cli
