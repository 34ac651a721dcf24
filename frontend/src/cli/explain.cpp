// `kiln explain --model NAME [--config JSON] [--batch N] [--fullgraph] [--freeze] [--dot FILE]
// [--backend cpu|interp]`: compiles a catalog model (random weights, eval mode, seed 0, no
// gradients), calls it on a random batch and then on one of batch + 1 (to show a recompile),
// and prints the traced graph and kiln::explain's report: graphs, guards, graph breaks with
// their source lines, recompiles with reasons, the backend, pass timings, the graph after
// the passes (fusion groups). --dot FILE draws the traced graph, and FILE's stem +
// ".fused.dot" the graph after the passes with each fusion group as a cluster. --freeze
// compiles with CompileOptions::freeze (parameters folded into the graph).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"

namespace kiln::cli {

namespace {

// A forward traced as far as it goes. Where it breaks, `graph` holds the ops recorded before
// the break (and no outputs): that is what can be drawn of a graph-breaking model.
struct PartialTrace {
  std::unique_ptr<ir::Graph> graph;
  std::string graph_break;  // the GraphBreakError's message; "" when the whole forward traced
};

PartialTrace trace_until_break(nn::Module& model, const Tensor& x) {
  PartialTrace out;
  detail::ForwardFn forward = [&](const std::vector<Tensor>& inputs) -> std::vector<Tensor> {
    try {
      return {model(inputs.at(0))};
    } catch (const GraphBreakError& e) {
      out.graph_break = e.what();
      return {};
    }
  };
  out.graph = detail::trace_module(model, {x}, forward);
  return out;
}

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Writes `graph` as DOT to `path` (with a note after "wrote PATH"), and a PNG beside it
// when Graphviz's `dot` is installed.
void write_dot(const ir::Graph& graph, const ir::DotOptions& options, const std::string& path,
               const std::string& note) {
  // --dot names one file but writes up to four: say so when one of them existed before.
  auto replaced = [](const std::string& p) {
    return std::filesystem::exists(p) ? " (replaced the existing file)" : "";
  };
  const std::string dot_note = replaced(path);
  {
    std::ofstream file(path);
    KILN_CHECK(file.good(), "expected a writable --dot file, cannot open '", path,
               "'. Fix: give a path in an existing, writable directory.");
    file << ir::to_dot(graph, options);
    file.close();
    KILN_CHECK(!file.fail(), "writing --dot file '", path,
               "' failed. Fix: check the disk space and permissions.");
  }
  std::cout << "wrote " << path << note << dot_note << "\n";
  std::string png = std::filesystem::path(path).replace_extension(".png").string();
  if (png == path) png += ".png";
  std::cout.flush();  // before the shell's output, if any
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    std::cout << "  (no PNG: Graphviz's `dot` is not installed; draw it with `dot -Tpng " << path
              << " -o " << png << "`)\n";
    return;
  }
  const std::string png_note = replaced(png);
  int rc = std::system(("dot -Tpng " + shell_quoted(path) + " -o " + shell_quoted(png)).c_str());
  if (rc == 0) {
    std::cout << "wrote " << png << png_note << "\n";
  } else {
    std::cout << "  (no PNG: `dot -Tpng " << path << "` failed with status " << rc << ")\n";
  }
}

}  // namespace

int run_explain(const std::vector<std::string>& raw) {
  Args args(command_spec("explain"), raw);
  const std::string name = model_option(args);
  const json::Value config = resolved_config(name, args);
  const int64_t batch = args.integer("batch", 2);
  const bool fullgraph = args.has("fullgraph");

  const Device device = device_option(args);

  manual_seed(0);
  std::shared_ptr<nn::Module> model = models::build_model(name, config);
  model->eval();
  model->to(device);
  // Every catalog model reads Fashion-MNIST images (as `kiln summary` assumes).
  Tensor x = randn({batch, 1, 28, 28}).to(device);
  Tensor bigger = randn({batch + 1, 1, 28, 28}).to(device);
  std::cout << "model " << name << " " << json::dump(config) << "\n"
            << "inputs: x " << x.type_str() << ", then " << bigger.type_str()
            << " (random; weights random, seed 0, eval mode)\n\n";

  PartialTrace traced = trace_until_break(*model, x);
  std::cout << "traced graph (kiln::trace):\n" << ir::print_graph(*traced.graph);
  if (!traced.graph_break.empty())
    std::cout << "  ... the trace stops here: " << traced.graph_break << "\n";
  std::cout << "\n";
  if (args.has("dot")) {
    ir::DotOptions options;
    // The host read that broke the trace is almost always of the last value recorded.
    if (!traced.graph_break.empty() && !traced.graph->nodes().empty())
      options.highlighted.push_back(traced.graph->nodes().back().get());
    write_dot(*traced.graph, options, args.str("dot", ""),
              traced.graph_break.empty() ? "" : " (the ops before the graph break; the last in red)");
  }

  CompileOptions options;
  options.fullgraph = fullgraph;
  options.backend = args.str("backend", options.backend);  // empty: by the device
  options.freeze = args.has("freeze");
  NoGradGuard no_grad;  // inference: the compiled backend runs its generated kernels
  auto compiled = compile(model, options);
  try {
    compiled(x);
    compiled(bigger);
  } catch (const GraphBreakError& e) {
    std::cerr << "kiln explain: compile(fullgraph) failed: " << e.what() << "\n";
    return 1;
  }
  std::cout << "\n";
  ExplainReport report = explain(compiled);
  report.print(std::cout);
  // The first graph after the passes: each fusion group is a dashed cluster (its region).
  if (args.has("dot") && !report.entries.empty() && !report.entries[0].optimized_graph_text.empty()) {
    std::filesystem::path dot(args.str("dot", ""));
    std::string fused = (dot.parent_path() / dot.stem()).string() + ".fused.dot";
    write_dot(*ir::parse_graph(report.entries[0].optimized_graph_text), {}, fused,
              " (after the passes: each fusion group is a dashed cluster)");
  }
  return 0;
}

}  // namespace kiln::cli
