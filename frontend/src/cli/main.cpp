// The `kiln` command-line tool: subcommands dispatch to one function each; every command
// answers --help from its declaration in command_specs.cpp.
#include <algorithm>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "kiln/error.h"

namespace {

using Runner = int (*)(const std::vector<std::string>&);

Runner runner(const std::string& command) {
  using namespace kiln::cli;
  if (command == "demo") return run_demo;
  if (command == "summary") return run_summary;
  if (command == "train") return run_train;
  if (command == "eval") return run_eval;
  if (command == "explain") return run_explain;
  if (command == "bench") return run_bench;
  if (command == "compile") return run_compile;
  if (command == "export") return run_export;
  if (command == "run") return run_run;
  if (command == "launch") return run_launch;
  return nullptr;
}

// Arguments after `--` belong to the command `kiln launch` runs: its --help is not ours.
bool asks_for_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), std::find(args.begin(), args.end(), "--"),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

}  // namespace

int main(int argc, char** argv) {
  using kiln::cli::cli_message;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kiln::cli::usage();
    return 2;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || (command == "help" && args.empty())) {
    std::cout << kiln::cli::usage();
    return 0;
  }
  if (command == "help") {  // kiln help CMD
    command = args[0];
    args = {"--help"};
  }
  try {
    const kiln::cli::CommandSpec& spec = kiln::cli::command_spec(command);
    if (asks_for_help(args)) {
      std::cout << kiln::cli::command_help(spec);
      return 0;
    }
    Runner run = runner(spec.name);
    KILN_CHECK(run, "kiln ", spec.name, " is declared in command_specs.cpp but has no runner. Fix: "
               "add it to runner() in main.cpp.");
    return run(args);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln" << (runner(command) ? " " + command : "") << ": " << cli_message(e.what())
              << "\n";
    return runner(command) ? 1 : 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "kiln " << command << ": out of memory.\n";
    return 1;
  }
}
