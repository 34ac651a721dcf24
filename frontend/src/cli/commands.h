// The subcommands of the `kiln` tool.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

int run_demo(const std::vector<std::string>& args);

}  // namespace kiln::cli
