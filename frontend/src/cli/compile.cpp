// `kiln compile (--model NAME | --checkpoint FILE) [--batch N] [--backend cpu|interp]
// [--freeze] [--graphs] [--cache-dir DIR]`: compiles a model for inference on one example
// batch and prints what the compiler made of it: each graph's ops before and after the passes,
// its fusion groups (one native kernel each), the pass and code generation timings and the
// kernel cache. With --cache-dir the kernels land in that cache, so a deployment that points
// KILN_CACHE_DIR at it compiles nothing on its first call.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"
#include "kiln/models/saved_model.h"

namespace kiln::cli {

namespace {

// Lines of text, each indented by `indent`.
std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += indent + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

void print_entry(const ExplainEntry& entry, size_t index, bool graphs) {
  std::printf("graph %zu: %zu ops, traced in %.1f ms\n", index, entry.ops, entry.trace_ms);
  std::fflush(stdout);
  if (!entry.graph_break.empty()) {
    std::cout << "  runs in " << entry.segments << " segments per call: " << entry.graph_break
              << "\n";
    for (const std::string& b : entry.breaks) std::cout << "    break: " << b << "\n";
  }
  if (!entry.backend.empty()) std::cout << "  backend: " << entry.backend << "\n";
  if (!entry.passes.empty()) std::cout << "  passes: " << entry.passes << "\n";
  if (!entry.fusion_groups.empty()) {
    std::cout << "  kernels (one per fusion group):\n";
    for (const std::string& g : entry.fusion_groups) std::cout << "    " << g << "\n";
  }
  for (const std::string& c : entry.captured) std::cout << "  captured constant: " << c << "\n";
  if (!graphs) return;
  if (!entry.graph_text.empty())
    std::cout << "  as traced:\n" << indented(entry.graph_text, "    ");
  if (!entry.optimized_graph_text.empty())
    std::cout << "  after the passes:\n" << indented(entry.optimized_graph_text, "    ");
}

}  // namespace

int run_compile(const std::vector<std::string>& raw) {
  Args args(command_spec("compile"), raw);
  KILN_CHECK(args.has("model") || args.has("checkpoint"),
             "expected --model NAME or --checkpoint FILE, found neither. Fix: kiln compile "
             "--model fashion_mlp, or kiln compile --checkpoint FILE. Models: ",
             model_names(), ".");
  if (args.has("cache-dir")) {
    // Read by the code generator when it opens its cache (the first compiled call below).
    ::setenv("KILN_CACHE_DIR", args.str("cache-dir", "").c_str(), 1);
  }
  const int64_t batch = args.integer("batch", 1);

  std::shared_ptr<nn::Module> model;
  std::vector<int64_t> shape;
  if (args.has("checkpoint")) {
    const std::string path = args.str("checkpoint", "");
    models::SavedModel saved = models::load_model(path);
    std::cout << "checkpoint " << path << ": model " << saved.name << " "
              << json::dump(saved.config) << "\n";
    model = saved.model;
    shape = checkpoint_sample_shape(path);
  } else {
    const std::string name = model_option(args);
    const json::Value config = resolved_config(name, args);
    manual_seed(0);
    model = models::build_model(name, config);
    std::cout << "model " << name << " " << json::dump(config) << " (random weights, seed 0)\n";
    shape = {1, 28, 28};
  }
  shape.insert(shape.begin(), batch);
  check_example_fits(*model, shape);
  model->eval();
  manual_seed(0);
  Tensor x = randn(IntList(shape.data(), shape.size()));
  NoGradGuard no_grad;  // inference: the cpu backend runs its generated kernels
  (*model)(x);          // initializes lazy modules before compile() reads the state

  CompileOptions options;
  options.backend = args.str("backend", options.backend);
  options.freeze = args.has("freeze");
  auto compiled = compile(model, options);
  auto start = std::chrono::steady_clock::now();
  compiled(x);
  const double first_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  const char* cache = std::getenv("KILN_CACHE_DIR");
  std::printf("input x %s, eval mode, no gradients, %d thread%s\n", x.type_str().c_str(),
              num_threads(), num_threads() == 1 ? "" : "s");
  std::printf("first call: %.1f ms (trace, passes, code generation or cache load, run)\n",
              first_ms);
  std::cout << "kernel cache: "
            << (cache && *cache ? std::string(cache) : "the default (~/.cache/kiln)") << "\n\n";
  ExplainReport report = explain(compiled);
  for (size_t i = 0; i < report.entries.size(); ++i)
    print_entry(report.entries[i], i, args.has("graphs"));
  if (args.has("cache-dir") && options.backend == "cpu") {
    std::cout << "\nthe kernels are in " << args.str("cache-dir", "")
              << ": a process run with KILN_CACHE_DIR=" << args.str("cache-dir", "")
              << " loads them instead of compiling\n";
  }
  return 0;
}

}  // namespace kiln::cli
