// The subcommands of the `kiln` tool, and what they share.
#pragma once

#include <string>
#include <vector>

#include "kiln/serialize/json.h"

namespace kiln::cli {

class Args;

int run_demo(const std::vector<std::string>& args);
int run_summary(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_explain(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_run(const std::vector<std::string>& args);

// "fashion_mlp, residual_mlp, ..." for messages.
std::string model_names();
// The --config option parsed as JSON (null when absent); a parse error names the option.
json::Value parse_config_option(const Args& args);

}  // namespace kiln::cli
