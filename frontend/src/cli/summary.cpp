// `kiln summary --model NAME [--config JSON]`: prints the model tree and the Keras-style
// summary table (output shapes and parameter counts from one shape-only pass).
#include "kiln/nn/summary.h"

#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"

namespace kiln::cli {

int run_summary(const std::vector<std::string>& raw) {
  Args args(command_spec("summary"), raw);
  const std::string name = model_option(args);
  const json::Value config = resolved_config(name, args);
  std::shared_ptr<nn::Module> model = models::build_model(name, config);
  std::cout << "model " << name << " " << json::dump(config) << "\n\n" << *model << "\n\n";
  // Every catalog model reads Fashion-MNIST images; the batch dim is left open.
  std::cout << nn::summary(*model, {{-1, 1, 28, 28}});
  return 0;
}

}  // namespace kiln::cli
