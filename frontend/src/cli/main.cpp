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
        "  demo [--epochs N] [--batch N] [--lr X] [--seed N] [--save FILE]\n"
        "       train FashionMLP on Fashion-MNIST, save it, rebuild it from the file, re-evaluate\n"
        "  summary --model NAME [--config JSON]\n"
        "       print the model tree and its layer/shape/parameter table\n"
        "  train --model NAME [--config JSON] [--epochs N] [--batch N] [--lr X]\n"
        "        [--weight-decay X] [--seed N] [--max-train N] [--max-test N] [--save FILE]\n"
        "       train on Fashion-MNIST, print the test accuracy, save a checkpoint with its "
        "config\n"
        "  eval --checkpoint FILE [--max-test N] [--check-finite]\n"
        "       rebuild a model from a checkpoint alone and print its test accuracy;\n"
        "       --check-finite first refuses weights holding NaN or inf\n"
        "  explain --model NAME [--config JSON] [--batch N] [--fullgraph] [--freeze]\n"
        "          [--dot FILE] [--backend cpu|interp]\n"
        "       compile a model, call it twice, print its graph, guards, breaks, recompiles,\n"
        "       passes and fusion groups\n"
        "  bench --model NAME [--config JSON] [--batch N] [--iters N] [--backend cpu|interp]\n"
        "        [--freeze]\n"
        "       time a model eagerly and compiled (no gradients), print both, the compile time\n"
        "  export --checkpoint FILE -o DIR [--batch N | --dynamic-batch] [--portable]\n"
        "         [--max-batch N] [--embed-weights]\n"
        "       compile a checkpoint's model ahead of time into an artifact directory for\n"
        "       kiln_rt; any batch size by default (--dynamic-batch), --batch N fixes it,\n"
        "       --portable targets any CPU of this architecture (no AVX2/FMA),\n"
        "       --max-batch N bounds the dynamic batch, --embed-weights puts the weights in a\n"
        "       shared library (weights.so)\n"
        "  run DIR --input FILE.safetensors [--output FILE.safetensors] | run DIR --info\n"
        "       run an exported artifact through kiln_rt on the file's tensors (by input name,\n"
        "       else in file order), print the outputs and the latency; --info prints the\n"
        "       signature and manifest\n\n"
        "models: "
     << kiln::cli::model_names() << "\n";
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
    if (command == "summary") return kiln::cli::run_summary(args);
    if (command == "train") return kiln::cli::run_train(args);
    if (command == "eval") return kiln::cli::run_eval(args);
    if (command == "explain") return kiln::cli::run_explain(args);
    if (command == "bench") return kiln::cli::run_bench(args);
    if (command == "export") return kiln::cli::run_export(args);
    if (command == "run") return kiln::cli::run_run(args);
    std::cerr << "kiln: unknown command '" << command << "'\n";
    usage(std::cerr);
    return 2;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln " << command << ": " << e.what() << "\n";
    return 1;
  }
}
