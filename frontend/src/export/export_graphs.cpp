// Export's compile stage: trace (fullgraph), compile with frozen state, check against eager
// (export_graphs.h).
#include "export_graphs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kiln/cuda/codegen/toolkit.h"
#include "kiln/cuda/device.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/passes/pass_manager.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::detail {

namespace {

// One whole-forward trace, through compile()'s tracer (guards, symbolic dims, fullgraph).
TracedGraph trace_for_export(const std::shared_ptr<nn::Module>& model,
                             const std::vector<Tensor>& inputs, const ForwardFn& forward,
                             const std::vector<std::string>& names) {
  CompileOptions options;
  options.fullgraph = true;
  options.backend = "interp";  // the trace is what export wants; interp runs it cheaply
  options.input_names = names;
  options.cache_limit = 1;
  auto core = make_compiled_core(model, options);
  try {
    run_compiled(*core, inputs, {}, forward);
  } catch (const GraphBreakError& e) {
    throw GraphBreakError(str_cat("[export] ", model->type_name(),
                                  " cannot be exported: an artifact is one graph, and its "
                                  "forward breaks the graph. ",
                                  e.what()));
  }
  std::vector<TracedGraph> graphs = traced_graphs(*core);
  KILN_CHECK(graphs.size() == 1, "[export] expected one traced graph, found ", graphs.size(),
             ". Fix: this is a kiln bug in frontend/src/export.");
  return graphs[0];
}

// Largest |a - b| (0 when equal, NaNs in the same places count as equal). Throws when an
// element breaks |a - b| <= tolerance * (1 + |b|): the compiled graph must compute what the
// eager forward computes before anything is written.
double compare_with_eager(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                          double tolerance) {
  KILN_CHECK(a.size() == b.size(), "[export] the compiled graph returned ", a.size(),
             " outputs where eager returned ", b.size(),
             ". Fix: this is a kiln bug; please report it with the model.");
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    KILN_CHECK(a[i].sizes() == b[i].sizes(), "[export] output ", i, " of the compiled graph has ",
               a[i].type_str(), " where eager has ", b[i].type_str(),
               ". Fix: this is a kiln bug; please report it with the model.");
    std::vector<double> x = a[i].to(DType::Float64).to_vector<double>();
    std::vector<double> y = b[i].to(DType::Float64).to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) {
      if (std::isnan(x[k]) && std::isnan(y[k])) continue;
      double d = std::fabs(x[k] - y[k]);
      if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
      worst = std::max(worst, d);
      KILN_CHECK(
          d <= tolerance * (1 + std::fabs(y[k])), "[export] the compiled graph computes ", x[k],
          " where the eager forward computes ", y[k], " (output ", i, ", element ", k,
          "; tolerance ", tolerance,
          "), so no artifact was written. Fix: this is a kiln bug; please report it with the "
          "model. ExportOptions::pipeline can leave out a pass to find the culprit, and "
          "ExportOptions::tolerance loosens the check.");
    }
  }
  return worst;
}

// Every graph input the run needs, the module state in the state slots.
std::vector<Tensor> graph_arguments(const ir::Graph& g, const std::vector<Tensor>& state,
                                    const std::vector<Tensor>& inputs) {
  std::vector<Tensor> args;
  size_t next = 0;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (g.inputs()[i].kind == ir::InputKind::Input)
      args.push_back(inputs.at(next++));
    else
      args.push_back(i < state.size() ? state[i] : Tensor());
  }
  return args;
}

// Every value of `g` (regions included) placed on `device`, and the device attributes of its
// nodes (factory ops) with them: a GPU artifact traced on the CPU.
void place_on(ir::Graph& g, Device device) {
  for (const ir::GraphInput& in : g.inputs()) in.value->type.device = device;
  for (const auto& node : g.nodes()) {
    for (ir::Value* v : node->outputs) v->type.device = device;
    node->attrs->map_devices([device](Device) { return device; });
    for (const auto& region : node->regions) place_on(*region, device);
  }
}

// A graph for a GPU artifact: the trace placed on the GPU, compiled by the cuda backend with
// its PTX assembled into a cubin. Checked against eager where a GPU is present; elsewhere
// `unchecked` says so.
ExportedGraph compile_for_gpu(const TracedGraph& traced, const ExportOptions& options,
                              const std::vector<Tensor>& inputs, const std::vector<Tensor>& eager,
                              double& max_diff, std::string& unchecked) {
  std::unique_ptr<ir::Graph> graph = ir::clone_graph(*traced.graph);
  place_on(*graph, options.device);
  const bool gpu_present = cuda::is_available();
  ExportedGraph out;
  cuda::compiler::CompilerOptions co;
  co.pipeline = options.pipeline.empty() ? default_export_pipeline() : options.pipeline;
  co.frozen_state = traced.state;
  co.ptx.chip = artifact::kGpuArtifactChip;
  co.load = [&out, gpu_present](const cuda::codegen::PtxModule& module,
                                std::span<const cpu::exec::FusedKernelSpec> specs,
                                Device device) -> cuda::exec::FusedLauncher {
    out.cubin = cuda::codegen::assemble_cubin(module.ptx, module.chip).image;
    if (gpu_present) return cuda::compiler::driver_loader()(module, specs, device);
    return [](const std::string& name, std::span<void* const>, std::span<const int64_t>) {
      KILN_FAIL("[export] kernel ", name, " cannot run: there is no GPU here.");
    };
  };
  out.gpu = std::make_unique<cuda::compiler::CompiledGraph>(*graph, co);
  if (!gpu_present) {
    unchecked = "not checked against eager: no GPU here (" + cuda::unavailable_reason() + ")";
    return out;
  }
  std::vector<Tensor> args = graph_arguments(*traced.graph, traced.state, inputs);
  for (Tensor& a : args)
    if (a.defined() && a.device() != options.device) a = a.to(options.device);
  std::vector<Tensor> got = out.gpu->run(args);
  for (Tensor& t : got) t = t.to(kCPU);
  std::vector<Tensor> want;
  for (const Tensor& t : eager) want.push_back(t.to(kCPU));
  max_diff = std::max(max_diff, compare_with_eager(got, want, options.tolerance));
  return out;
}

ExportedGraph compile_for_export(const TracedGraph& traced, const ExportOptions& options,
                                 const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& eager, double& max_diff,
                                 std::string& unchecked) {
  if (options.device.is_cuda())
    return compile_for_gpu(traced, options, inputs, eager, max_diff, unchecked);
  cpu::compiler::CompilerOptions co;
  co.pipeline = options.pipeline.empty() ? default_export_pipeline() : options.pipeline;
  co.position_independent = true;
  co.host_cpu_features = !options.portable;
  co.frozen_state = traced.state;
  ExportedGraph out;
  out.compiled = std::make_unique<cpu::compiler::CompiledGraph>(*traced.graph, co);
  std::vector<Tensor> got = out.compiled->run(graph_arguments(*traced.graph, traced.state, inputs));
  max_diff = std::max(max_diff, compare_with_eager(got, eager, options.tolerance));
  return out;
}

}  // namespace

ExportedGraphs compile_export_graphs(const ExportRequest& request, const ExportOptions& options) {
  const std::vector<Tensor>& inputs = request.inputs;
  const std::vector<Tensor>& examples = request.examples;
  // The main graph, with every requested dynamic dim symbolic.
  TracedGraph main = trace_for_export(request.model, inputs, request.forward, request.names);
  check_dynamic_dims_traced(*main.graph, request);
  std::vector<Tensor> eager = request.forward(examples);
  ExportedGraphs out;
  std::vector<ExportedGraph>& graphs = out.graphs;
  graphs.push_back(
      compile_for_export(main, options, inputs, eager, out.max_abs_diff, out.unchecked));

  // Size 1 is special (it broadcasts), so a symbolic graph serves sizes >= 2. For each
  // symbol, a trace at size 1 that matches the symbolic graph specialized to 1 shows the
  // graph serves 1 too; otherwise that trace becomes a graph of its own.
  std::vector<std::string> symbols = input_symbols(*main.graph);
  const int64_t batch_max = batch_limit(*main.graph, options, examples);
  for (const std::string& s : symbols) {
    // A specialization that fails its own infer check cannot match the trace either.
    std::unique_ptr<ir::Graph> specialized = ir::clone_graph(*main.graph);
    bool specialized_ok = true;
    try {
      passes::PassManager("specialize{" + s + "=1,allow_one=1}").run(*specialized);
    } catch (const Error&) {
      specialized_ok = false;
    }
    int64_t sentinel = ir::parse_size(s);
    std::vector<Tensor> ones, ones_eager;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Shape& traced = main.graph->inputs()[i].value->type.shape;
      Tensor x = inputs[i], e = examples[i];
      uint64_t marks = inputs[i].impl()->dynamic_dims;
      for (int64_t d = 0; d < x.dim(); ++d) {
        if (traced[d] != sentinel) continue;
        x = narrow(x, d, 0, 1);
        e = narrow(e, d, 0, 1);
        marks &= ~(uint64_t{1} << d);
      }
      x = narrow(x, 0, 0, x.size(0));
      x.impl()->dynamic_dims = marks;
      ones.push_back(x);
      ones_eager.push_back(e);
    }
    TracedGraph at_one = trace_for_export(request.model, ones, request.forward, request.names);
    int64_t min = 1;
    if (!specialized_ok ||
        ir::structural_hash(*at_one.graph) != ir::structural_hash(*specialized)) {
      min = 2;
      graphs.push_back(compile_for_export(at_one, options, ones, request.forward(ones_eager),
                                          out.max_abs_diff, out.unchecked));
      graphs.back().symbols.push_back({s, 1, 1});
    }
    int64_t max = is_batch_symbol(*main.graph, s) ? batch_max : kUnboundedSize;
    graphs[0].symbols.push_back({s, min, max});
    out.symbols.push_back({s, 1, max});
  }
  for (size_t g = 1; g < graphs.size(); ++g)
    for (const artifact::SymbolRange& r : graphs[0].symbols)
      if (r.name != graphs[g].symbols[0].name) graphs[g].symbols.push_back(r);
  return out;
}

}  // namespace kiln::detail
