// The compiled CPU backend: passes on a copy of the graph, one JIT module for all of its
// fusion groups, and a graph runner (graph_runner.h: the planned executor, or for graphs
// with control flow the reference executor's node loop) to run them with the other nodes'
// eager kernels.
#include <chrono>
#include <sstream>

#include "kiln/cpu/codegen/kernels.h"
#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/cpu/exec/graph_runner.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/fused.h"

namespace kiln::cpu::compiler {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Nodes outside fusion groups, regions included.
int count_other_nodes(const ir::Graph& g) {
  int other = 0;
  for (const auto& node : g.nodes()) {
    if (node->op == &ops::fused) continue;
    ++other;
    for (const auto& region : node->regions) other += count_other_nodes(*region);
  }
  return other;
}

}  // namespace

std::string CompileStats::str() const {
  std::ostringstream os;
  os.precision(3);
  os << "passes " << passes.total_ms << " ms, codegen "
     << codegen_build_ms + codegen_lower_ms + codegen_llvm_ms + codegen_load_ms << " ms (build "
     << codegen_build_ms << ", lower " << codegen_lower_ms << ", llvm " << codegen_llvm_ms
     << ", load " << codegen_load_ms << "); " << kernels << " kernels (" << fused_ops << " ops), "
     << other_nodes << " other nodes, "
     << (planned ? "planned executor" : "node-by-node executor (control flow)");
  if (epilogues) os << ", " << epilogues << " epilogues";
  if (packed_weights) os << ", " << packed_weights << " packed weights";
  if (image_chains)
    os << ", " << image_chains << (image_chains == 1 ? " image chain" : " image chains");
  if (frozen_parameters) os << ", " << frozen_parameters << " frozen parameters";
  if (!memory.empty()) os << "; memory: " << memory;
  if (!target.empty()) os << "; target " << target;
  if (!cache.empty()) os << "; " << cache;
  return os.str();
}

struct CompiledGraph::Compiled {
  std::shared_ptr<ir::Graph> graph;
  std::unique_ptr<codegen::KernelModule> module;
  exec::GraphRunner::Kernels kernels;
  CompileStats stats;
  size_t input_count = 0;  // of the graph as given (the passes may append constants)
  Clock::time_point start;
};

CompiledGraph::Compiled CompiledGraph::compile(const ir::Graph& graph,
                                               const CompilerOptions& options) {
  Compiled c;
  c.start = Clock::now();
  c.graph = ir::clone_graph(graph);
  c.input_count = graph.inputs().size();
  CompileStats& stats = c.stats;
  passes::PipelineOptions pipeline_options;
  for (size_t i = 0; i < options.frozen_state.size() && i < c.input_count; ++i) {
    ir::GraphInput& in = c.graph->mutable_inputs()[i];
    bool state = in.kind == ir::InputKind::Parameter || in.kind == ir::InputKind::Buffer;
    if (!state || !options.frozen_state[i].defined()) continue;
    in.constant = options.frozen_state[i].contiguous();
    ++stats.frozen_parameters;
  }
  pipeline_options.context.parameters_frozen = stats.frozen_parameters > 0;
  pipeline_options.context.fusion = &fusion_rules();
  pipeline_options.verify_each = options.verify_passes;
  pipeline_options.print_after = options.print_after;
  pipeline_options.print_sink = options.print_sink;
  stats.passes = passes::PassManager(options.pipeline, pipeline_options).run(*c.graph);

  std::vector<const ir::Node*> fused = exec::fused_nodes(*c.graph);
  stats.other_nodes = count_other_nodes(*c.graph);
  std::vector<exec::FusedKernelSpec> specs;
  for (size_t i = 0; i < fused.size(); ++i) {
    specs.push_back(exec::fused_kernel_spec(*fused[i], exec::fused_kernel_name(i)));
    stats.fused_ops += static_cast<int>(fused[i]->regions.at(0)->nodes().size());
  }
  stats.kernels = static_cast<int>(specs.size());
  if (specs.empty()) return c;
  codegen::CodegenOptions codegen_options;
  codegen_options.cache_dir = codegen::default_cache_dir();  // a hit skips lowering and LLVM
  codegen_options.position_independent = options.position_independent;
  codegen_options.host_cpu_features = options.host_cpu_features;
  c.module = codegen::compile_kernels(specs, codegen_options);
  const codegen::CodegenTimings& t = c.module->timings();
  stats.codegen_build_ms = t.build_ms;
  stats.codegen_lower_ms = t.lower_ms;
  stats.codegen_llvm_ms = t.llvm_ms;
  stats.codegen_load_ms = t.load_ms;
  stats.target = c.module->target();
  stats.cache = c.module->cache_note();
  codegen::KernelModule* module = c.module.get();
  c.kernels = exec::bind_fused_kernels(
      *c.graph, [module](const std::string& name) { return module->lookup(name); });
  return c;
}

CompiledGraph::CompiledGraph(const ir::Graph& graph, const CompilerOptions& options)
    : CompiledGraph(compile(graph, options)) {}

CompiledGraph::CompiledGraph(Compiled c)
    : exec::GraphRunner(c.graph, std::move(c.kernels), c.input_count),
      module_(std::move(c.module)),
      stats_(std::move(c.stats)) {
  const exec::Plan* plan = first_plan();
  stats_.planned = plan != nullptr;
  if (plan) {
    stats_.epilogues = plan->epilogues();
    stats_.packed_weights = plan->packed_weights();
    stats_.image_chains = plan->image_chains();
    stats_.memory = plan->symbolic_sizes() ? "buffers planned per input size" : plan->memory().str();
  }
  stats_.total_ms = ms_since(c.start);
}

CompiledGraph::~CompiledGraph() = default;

}  // namespace kiln::cpu::compiler
