// The `kiln` command-line tool: subcommands dispatch to one function each.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "kiln/error.h"

namespace {

void usage(std::ostream& os) {
  os << "usage: kiln <command> [options]\n\n"
        "commands:\n"
        "  demo [--epochs N] [--hidden N] [--batch N] [--lr X] [--seed N]\n"
        "       train an MLP on Fashion-MNIST with raw tensors and autograd, print test accuracy\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "demo") return kiln::cli::run_demo(args);
    std::cerr << "kiln: unknown command '" << command << "'\n";
    usage(std::cerr);
    return 2;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln " << command << ": " << e.what() << "\n";
    return 1;
  }
}
