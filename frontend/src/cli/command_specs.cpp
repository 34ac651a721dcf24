// Every `kiln` command's options, declared once: the parser, `kiln CMD --help` and `kiln
// --help` read them from here.
//
// One meaning per flag name across commands: --batch is always the batch of the example
// input a model is traced or run with; training's batch is --batch-size.
#include "args.h"

namespace kiln::cli {

namespace {

using Kind = OptionSpec::Kind;

constexpr double kMaxExampleBatch = 1 << 20;   // an example input of [N, 1, 28, 28] floats
constexpr double kMaxInt32 = 2147483647.0;

OptionSpec model_option() {
  return {.name = "model", .placeholder = "NAME", .help = "the catalog model (see `kiln --help`)"};
}
OptionSpec config_option() {
  return {.name = "config",
          .placeholder = "JSON",
          .help = "override config keys, e.g. '{\"d_hidden\": 512}'"};
}
OptionSpec example_batch_option(double default_batch) {
  return {.name = "batch",
          .kind = Kind::Integer,
          .placeholder = "N",
          .help = "the example input's batch (default " +
                  std::to_string(static_cast<int>(default_batch)) + ")",
          .min = 1,
          .max = kMaxExampleBatch};
}
OptionSpec backend_option() {
  return {.name = "backend",
          .placeholder = "NAME",
          .help = "cpu or cuda (native code; the default is the device's) or interp (the "
                  "reference executor)",
          .choices = {"cpu", "cuda", "interp"}};
}
OptionSpec device_option() {
  return {.name = "device",
          .placeholder = "DEVICE",
          .help = "run on cpu (the default), cuda or cuda:N (the N-th GPU)"};
}
OptionSpec freeze_option() {
  return {.name = "freeze",
          .kind = Kind::Flag,
          .help = "fold the parameters into the compiled graph (CompileOptions::freeze)"};
}
OptionSpec epochs_option(int default_epochs) {
  return {.name = "epochs",
          .kind = Kind::Integer,
          .placeholder = "N",
          .help = "passes over the training set (default " + std::to_string(default_epochs) + ")",
          .min = 1,
          .max = 100000};
}
OptionSpec batch_size_option() {
  return {.name = "batch-size",
          .kind = Kind::Integer,
          .placeholder = "N",
          .help = "training batch size (default 128)",
          .min = 1,
          .max = kMaxInt32};
}
OptionSpec lr_option() {
  return {.name = "lr",
          .kind = Kind::Number,
          .placeholder = "X",
          .help = "Adam(W)'s learning rate, decayed along a cosine (default 0.001)",
          .min = 0,
          .min_exclusive = true};
}
OptionSpec seed_option() {
  return {.name = "seed",
          .kind = Kind::Integer,
          .placeholder = "N",
          .help = "seed of the initial weights, shuffling and dropout (default 0)",
          .min = 0};
}
OptionSpec save_option(const std::string& help) {
  return {.name = "save", .placeholder = "FILE", .help = help};
}
OptionSpec max_images_option(const std::string& split) {
  return {.name = "max-" + split,
          .kind = Kind::Integer,
          .placeholder = "N",
          .help = "use only the first N " + split + " images (default: all)",
          .min = 1,
          .max = kMaxInt32,
          .range_note = "Omit it to use every " + split + " image."};
}
RetiredOption training_batch_retired() {
  return {"batch",
          "--batch-size N for the training batch (--batch names the example batch of "
          "explain, bench, compile and export)"};
}

std::vector<CommandSpec> make_specs() {
  return {
      {.name = "demo",
       .summary = "train FashionMLP on Fashion-MNIST, save, reload, compile: the main job",
       .details = "Builds FashionMLP, prints its tree and summary, trains it on Fashion-MNIST, "
                  "saves a checkpoint,\nrebuilds the model from that file alone and checks "
                  "that it scores the same test accuracy;\nthen compiles it (its IR, the "
                  "compiled accuracy, fusion groups, eager vs compiled latency)\nand shows a "
                  "graph break and its fix.",
       .options = {epochs_option(10), batch_size_option(), lr_option(), seed_option(),
                   save_option("where the checkpoint goes (default $TMPDIR/kiln-demo.safetensors)")},
       .retired = {training_batch_retired()}},
      {.name = "summary",
       .summary = "print a model's tree and its layer / shape / parameter table",
       .details = "Builds a catalog model from its config and prints its module tree and a "
                  "Keras-style table\n(output shapes and parameter counts from one shape-only "
                  "pass over [N, 1, 28, 28] images).",
       .options = {model_option(), config_option()}},
      {.name = "train",
       .summary = "train a model on Fashion-MNIST, print its accuracy, save a checkpoint",
       .details = "Trains a catalog model on Fashion-MNIST (AdamW, cosine decay), prints the "
                  "test accuracy, and with\n--save writes a safetensors checkpoint holding the "
                  "model's name and config, which `kiln eval`\nand `kiln export` rebuild it "
                  "from. A non-finite loss stops training, naming the step.",
       .options = {model_option(), config_option(), epochs_option(5), batch_size_option(),
                   lr_option(),
                   {.name = "weight-decay",
                    .kind = Kind::Number,
                    .placeholder = "X",
                    .help = "AdamW's decoupled weight decay (default 0: Adam)",
                    .min = 0,
                    .max = 1},
                   seed_option(), max_images_option("train"), max_images_option("test"),
                   save_option("write the trained model's checkpoint there (checked before "
                               "training)"),
                   device_option(),
                   {.name = "nproc",
                    .kind = Kind::Integer,
                    .placeholder = "N",
                    .help = "train data-parallel in N processes on this machine (kiln launch); "
                            "--batch-size stays the global batch, rank 0 prints and saves; with "
                            "--device cuda each rank takes its own GPU (nccl)",
                    .min = 1,
                    .max = 4096}},
       .retired = {training_batch_retired()}},
      {.name = "eval",
       .summary = "rebuild a model from a checkpoint alone and print its test accuracy",
       .details = "Rebuilds the model from the name and config stored in a checkpoint written "
                  "by `kiln train --save`,\nloads its weights (each verified against its stored "
                  "digest) and prints its accuracy on the\nFashion-MNIST test split (the only "
                  "files it reads besides the checkpoint).",
       .options = {{.name = "checkpoint", .placeholder = "FILE", .help = "the checkpoint to rebuild"},
                   max_images_option("test"),
                   {.name = "check-finite",
                    .kind = Kind::Flag,
                    .help = "first refuse weights holding NaN or inf, naming the tensor"},
                   device_option()}},
      {.name = "explain",
       .summary = "compile a model twice and report graphs, guards, breaks, recompiles, fusion",
       .details = "Compiles a catalog model (random weights, seed 0, eval mode, no gradients), "
                  "calls it on a\nbatch and then on one of batch + 1 (to show a recompile), "
                  "and prints the traced graph and\nkiln::explain's report: graphs, guards, "
                  "graph breaks with their source lines, recompiles\nwith reasons, the backend, "
                  "pass timings and the fusion groups.",
       .options = {model_option(), config_option(), example_batch_option(2),
                   {.name = "fullgraph",
                    .kind = Kind::Flag,
                    .help = "a graph break is an error naming its line, not segments"},
                   freeze_option(),
                   {.name = "dot",
                    .placeholder = "FILE",
                    .help = "draw the traced graph to FILE and the fused one to FILE's stem + "
                            ".fused.dot (PNGs too with Graphviz)"},
                   backend_option(), device_option()}},
      {.name = "bench",
       .summary = "time a model eagerly and compiled, print both and the compile time",
       .details = "Times a catalog model (random weights, seed 0, eval mode, no gradients) "
                  "eagerly and through\nkiln::compile, and prints microseconds per call of "
                  "each, their ratio, the first compiled\ncall's time and the largest "
                  "difference between the two outputs (on a GPU, the launches per call\ntoo).",
       .options = {model_option(), config_option(), example_batch_option(1),
                   {.name = "iters",
                    .kind = Kind::Integer,
                    .placeholder = "N",
                    .help = "calls per timed repeat (default 100)",
                    .min = 1,
                    .max = 1e7},
                   backend_option(), freeze_option(), device_option()}},
      {.name = "compile",
       .summary = "compile a model or checkpoint: its graphs, kernels and timings",
       .details = "Compiles a catalog model (random weights, seed 0) or a checkpoint's model "
                  "for inference on\none example batch, and prints what the compiler made: "
                  "each graph's ops before and after\nthe passes, the fusion groups (one "
                  "native kernel each), the pass and code generation\ntimings and the kernel "
                  "cache used. --cache-dir writes the kernels to that cache, so a\nlater "
                  "process (KILN_CACHE_DIR=DIR) compiles nothing.",
       .options = {model_option(),
                   {.name = "checkpoint",
                    .placeholder = "FILE",
                    .help = "compile the model a checkpoint holds (its trained weights)"},
                   config_option(), example_batch_option(1), backend_option(), freeze_option(),
                   {.name = "graphs",
                    .kind = Kind::Flag,
                    .help = "also print each graph as traced and after the passes"},
                   {.name = "cache-dir",
                    .placeholder = "DIR",
                    .help = "the kernel cache to use and fill (default: KILN_CACHE_DIR, else "
                            "~/.cache/kiln)"}},
       .exclusive = {{{"model", "checkpoint"},
                      "a checkpoint names its model; give one of them"},
                     {{"checkpoint", "config"},
                      "a checkpoint holds its config; --config applies to --model only"}}},
      {.name = "export",
       .summary = "compile a checkpoint ahead of time into an artifact for kiln_rt",
       .details = "Rebuilds a checkpoint's model and compiles it ahead of time into an "
                  "artifact directory that\nkiln_rt (and `kiln run`) loads without the "
                  "compiler. The batch dim is dynamic by default;\n--batch N fixes it.",
       .options = {{.name = "checkpoint",
                    .placeholder = "FILE",
                    .help = "a checkpoint written by `kiln train --save`"},
                   {.name = "output",
                    .placeholder = "DIR",
                    .help = "the artifact directory to write (replaced atomically)",
                    .short_name = "o"},
                   {.name = "batch",
                    .kind = Kind::Integer,
                    .placeholder = "N",
                    .help = "export for this batch size only (default: any, --dynamic-batch)",
                    .min = 1,
                    .max = kMaxExampleBatch},
                   {.name = "dynamic-batch",
                    .kind = Kind::Flag,
                    .help = "serve any batch size (the default)"},
                   {.name = "max-batch",
                    .kind = Kind::Integer,
                    .placeholder = "N",
                    .help = "bound the dynamic batch to 1..N",
                    .min = 1,
                    .max = kMaxInt32},
                   {.name = "portable",
                    .kind = Kind::Flag,
                    .help = "target any CPU of this architecture (no AVX2/FMA)"},
                   {.name = "embed-weights",
                    .kind = Kind::Flag,
                    .help = "put the weights in a shared library (weights.so)"},
                   {.name = "device",
                    .placeholder = "DEVICE",
                    .help = "cpu (the default), or cuda: a GPU artifact (sm_90 and newer; "
                            "exporting one needs no GPU)",
                    .choices = {"cpu", "cuda"}}},
       .exclusive = {{{"batch", "dynamic-batch"},
                      "--batch N fixes the batch, --dynamic-batch serves any; give one"},
                     {{"batch", "max-batch"},
                      "--max-batch bounds a dynamic batch, and --batch N makes it static"}}},
      {.name = "run",
       .positional = "DIR",
       .summary = "run an exported artifact through kiln_rt, or print its signature",
       .details = "Loads an artifact written by `kiln export` through kiln_rt, as an "
                  "application would, and runs\nit on the tensors of a safetensors file (by "
                  "input name, else in file order), printing the\noutputs and the latency; "
                  "--info describes the artifact instead.",
       .options = {{.name = "input",
                    .placeholder = "FILE",
                    .help = "a safetensors file holding the inputs"},
                   {.name = "output",
                    .placeholder = "FILE",
                    .help = "write the outputs to this safetensors file"},
                   {.name = "info",
                    .kind = Kind::Flag,
                    .help = "print the signature, the target, the weights and whether it runs here; run nothing"}},
       .exclusive = {{{"info", "input"}, "--info runs nothing"},
                     {{"info", "output"}, "--info runs nothing"}}},
      {.name = "launch",
       .summary = "start N copies of a command as the ranks of a data-parallel job (torchrun)",
       .details = "kiln launch --nproc N [options] -- COMMAND [ARGS...]\n\n"
                  "Starts N copies of COMMAND on this machine with KILN_RANK, KILN_LOCAL_RANK, "
                  "KILN_WORLD_SIZE,\nKILN_LOCAL_WORLD_SIZE, KILN_MASTER_ADDR and "
                  "KILN_MASTER_PORT set (and KILN_NUM_THREADS to\nthe cores / N unless set), "
                  "prefixes each line they print with \"[rank R] \", and waits for\nthem. When "
                  "one rank fails, the others get SIGTERM, then SIGKILL after the grace, and the "
                  "exit\nstatus is the failed rank's (128 + the signal when one killed it). "
                  "Everything after `--`\nis the command, e.g.\n\n"
                  "  kiln launch --nproc 2 -- kiln train --model fashion_mlp\n\n"
                  "A job on M machines runs kiln launch on each, with the same --nnodes M and "
                  "--master\n(node 0's address and a free port there) and --node-rank 0..M-1.",
       .options = {{.name = "nproc",
                    .kind = Kind::Integer,
                    .placeholder = "N",
                    .help = "ranks to start on this machine (required)",
                    .min = 1,
                    .max = 4096},
                   {.name = "nnodes",
                    .kind = Kind::Integer,
                    .placeholder = "M",
                    .help = "machines in the job (default 1)",
                    .min = 1,
                    .max = 65536},
                   {.name = "node-rank",
                    .kind = Kind::Integer,
                    .placeholder = "R",
                    .help = "this machine's index, 0..M-1 (default 0)",
                    .min = 0,
                    .max = 65535},
                   {.name = "master",
                    .placeholder = "ADDR:PORT",
                    .help = "node 0's address and a free port there (default 127.0.0.1 and "
                            "any free port; needed with --nnodes)"},
                   {.name = "no-prefix",
                    .kind = Kind::Flag,
                    .help = "print the ranks' lines as they are, without \"[rank R] \""},
                   {.name = "grace-ms",
                    .kind = Kind::Integer,
                    .placeholder = "MS",
                    .help = "after a failure, the others' time from SIGTERM to SIGKILL "
                            "(default 5000)",
                    .min = 0,
                    .max = 3600000}}},
  };
}

}  // namespace

const std::vector<CommandSpec>& command_specs() {
  static const std::vector<CommandSpec> specs = make_specs();
  return specs;
}

}  // namespace kiln::cli
