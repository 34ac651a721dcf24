// The subcommands of the `kiln` tool, and what they share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/serialize/json.h"

namespace kiln::nn {
class Module;
}

namespace kiln::cli {

class Args;

int run_demo(const std::vector<std::string>& args);
int run_summary(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_explain(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_compile(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_run(const std::vector<std::string>& args);
int run_launch(const std::vector<std::string>& args);

// "fashion_mlp, residual_mlp, ..." for messages.
std::string model_names();

// --model's value as its catalog name: required, any spelling the catalog accepts ('-' for
// '_', an earlier name); an unknown one gets a did-you-mean and the list of names.
std::string model_option(const Args& args);

// The complete config of catalog model `name` from --config (its defaults overridden), checked
// against what the CLI feeds every model: Fashion-MNIST images [N, 1, 28, 28] and, when
// `for_training`, labels 0..9. A mismatch is an error with the --config fix.
json::Value resolved_config(const std::string& name, const Args& args, bool for_training = false);

// --device's value (default cpu): a GPU must be there, else the reason none is and the fix.
Device device_option(const Args& args);

// One sample's shape as a checkpoint records it (its config entry's "input_shape"), or the
// Fashion-MNIST image shape [1, 28, 28] for checkpoints written before it was recorded.
std::vector<int64_t> checkpoint_sample_shape(const std::string& path);

// Refuses an example input of `shape` (batch first) before it is allocated when it, or the
// largest activation a shape-only pass over `model` finds, would take more than half of this
// machine's memory: the error names the shape, the module and the bytes.
void check_example_fits(nn::Module& model, const std::vector<int64_t>& shape);

}  // namespace kiln::cli
