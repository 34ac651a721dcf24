// The compiled GPU backend's compile steps: passes on a copy of the graph with the GPU's
// fusion rules, matmuls and their bias and activation made cuBLASLt epilogues (exec/
// gemm_epilogue.h), the host scalar constants that fusion groups read placed on the GPU, one PTX
// module for all the groups, loaded on the graph's GPU; then the GPU graph runner.
#include <chrono>
#include <sstream>

#include "kiln/cpu/exec/plan.h"
#include "kiln/cuda/compiler/cuda_backend.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/exec/gemm_epilogue.h"
#include "kiln/error.h"
#include "kiln/ops/fused.h"

namespace kiln::cuda::compiler {

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

// The GPU the graph runs on (refusal() has checked there is exactly one).
Device graph_device(const ir::Graph& g) {
  for (const ir::GraphInput& in : g.inputs())
    if (in.value->type.device.is_cuda()) return in.value->type.device;
  for (const auto& node : g.nodes())
    for (const ir::Value* v : node->outputs)
      if (v->type.device.is_cuda()) return v->type.device;
  KILN_FAIL("[cuda] graph ", g.name(), " has no value on a GPU; the cuda backend runs GPU "
            "tensors. Fix: move the model and its inputs with .to(kiln::kCUDA).");
}

// The architecture to generate PTX for: the GPU's own, or sm_90 for GPUs newer than the code
// generator knows (their driver compiles sm_90 PTX for them) and when the GPU cannot be asked.
std::string chip_for(Device device) {
  if (!is_available() || device.index >= device_count()) return "sm_90";
  DeviceProperties p = get_device_properties(device.index);
  int sm = p.major * 10 + p.minor;
  return sm > 90 ? "sm_90" : "sm_" + std::to_string(sm);
}

// Puts the 0-d host constants that fusion groups read on `device`: a generated kernel reads
// every operand from GPU memory. Only their types change here (compiling needs no GPU); the
// runner copies the data over before its first run (exec::GraphRunner). Eager nodes read them
// there as well as on the host. Returns how many moved.
int place_group_scalars_on(ir::Graph& g, Device device) {
  std::vector<bool> read_by_group;
  for (const auto& node : g.nodes()) {
    if (node->op != &ops::fused) continue;
    for (const ir::Value* v : node->inputs) {
      if (!v) continue;
      if (read_by_group.size() <= static_cast<size_t>(v->id)) read_by_group.resize(v->id + 1);
      read_by_group[v->id] = true;
    }
  }
  int moved = 0;
  for (ir::GraphInput& in : g.mutable_inputs()) {
    ir::Value& v = *in.value;
    bool read = static_cast<size_t>(v.id) < read_by_group.size() && read_by_group[v.id];
    if (in.kind != ir::InputKind::Constant || !v.type.device.is_cpu() || !read) continue;
    v.type.device = device;
    ++moved;
  }
  // The groups' region inputs take their operands' types.
  for (const auto& node : g.nodes()) {
    if (node->op != &ops::fused) continue;
    const auto& region_inputs = node->regions.at(0)->inputs();
    for (size_t i = 0; i < node->inputs.size(); ++i)
      if (node->inputs[i]) region_inputs[i].value->type.device = node->inputs[i]->type.device;
  }
  return moved;
}

}  // namespace

std::string CompileStats::str() const {
  std::ostringstream os;
  os.precision(3);
  os << "passes " << passes.total_ms << " ms, ptx " << ptx_build_ms + ptx_lower_ms << " ms (build "
     << ptx_build_ms << ", lower " << ptx_lower_ms << "), load " << load_ms << " ms; " << kernels
     << " kernels (" << fused_ops << " ops), ";
  if (gemm_epilogues) os << gemm_epilogues << " GEMM epilogues, ";
  os << other_nodes << " other nodes";
  if (host_scalars) os << ", " << host_scalars << " host scalars moved to the GPU";
  if (frozen_parameters) os << ", " << frozen_parameters << " frozen parameters";
  if (!chip.empty()) os << "; " << chip;
  return os.str();
}

struct CompiledGraph::Compiled {
  std::shared_ptr<ir::Graph> graph;
  codegen::PtxModule ptx;
  exec::FusedLauncher launch;
  CompileStats stats;
  size_t input_count = 0;  // of the graph as given (the passes may append constants)
  Clock::time_point start;
};

CompiledGraph::Compiled CompiledGraph::compile(const ir::Graph& graph,
                                               const CompilerOptions& options) {
  Compiled c;
  c.start = Clock::now();
  if (std::optional<std::string> why = refusal(graph))
    KILN_FAIL("[cuda] cannot compile graph ", graph.name(), ": ", *why,
              ". Fix: move the model and its inputs to one GPU (.to(kiln::kCUDA)), or compile "
              "with another backend.");
  c.graph = ir::clone_graph(graph);
  c.input_count = graph.inputs().size();
  CompileStats& stats = c.stats;
  for (size_t i = 0; i < options.frozen_state.size() && i < c.input_count; ++i) {
    ir::GraphInput& in = c.graph->mutable_inputs()[i];
    bool state = in.kind == ir::InputKind::Parameter || in.kind == ir::InputKind::Buffer;
    if (!state || !options.frozen_state[i].defined()) continue;
    in.constant = options.frozen_state[i].contiguous();
    ++stats.frozen_parameters;
  }
  passes::PipelineOptions pipeline_options;
  pipeline_options.context.parameters_frozen = stats.frozen_parameters > 0;
  pipeline_options.context.fusion = &fusion_rules();
  pipeline_options.verify_each = options.verify_passes;
  pipeline_options.print_after = options.print_after;
  pipeline_options.print_sink = options.print_sink;
  stats.passes = passes::PassManager(options.pipeline, pipeline_options).run(*c.graph);

  const Device device = graph_device(*c.graph);
  stats.gemm_epilogues = exec::fuse_gemm_epilogues(*c.graph);
  stats.host_scalars = place_group_scalars_on(*c.graph, device);
  std::vector<const ir::Node*> fused = cpu::exec::fused_nodes(*c.graph);
  stats.other_nodes = count_other_nodes(*c.graph);
  std::vector<cpu::exec::FusedKernelSpec> specs;
  for (size_t i = 0; i < fused.size(); ++i) {
    specs.push_back(cpu::exec::fused_kernel_spec(*fused[i], cpu::exec::fused_kernel_name(i)));
    stats.fused_ops += static_cast<int>(fused[i]->regions.at(0)->nodes().size());
  }
  stats.kernels = static_cast<int>(specs.size());
  if (specs.empty()) return c;
  codegen::PtxOptions ptx_options = options.ptx;
  if (ptx_options.chip.empty()) ptx_options.chip = chip_for(device);
  c.ptx = codegen::compile_ptx(specs, ptx_options);
  stats.ptx_build_ms = c.ptx.timings.build_ms;
  stats.ptx_lower_ms = c.ptx.timings.lower_ms;
  stats.chip = c.ptx.chip;
  Clock::time_point load_start = Clock::now();
  c.launch = (options.load ? options.load : driver_loader())(c.ptx, specs, device);
  stats.load_ms = ms_since(load_start);
  return c;
}

CompiledGraph::CompiledGraph(const ir::Graph& graph, const CompilerOptions& options)
    : CompiledGraph(compile(graph, options)) {}

CompiledGraph::CompiledGraph(Compiled c)
    : exec::GraphRunner(c.graph, std::move(c.launch), c.input_count),
      ptx_(std::move(c.ptx)),
      stats_(std::move(c.stats)) {
  stats_.total_ms = ms_since(c.start);
}

CompiledGraph::~CompiledGraph() = default;

std::string CompiledGraph::summary() const {
  std::string launches = launch_summary();
  return launches.empty() ? stats_.str() : stats_.str() + "; " + launches;
}

}  // namespace kiln::cuda::compiler
