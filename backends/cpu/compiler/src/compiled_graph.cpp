// The compiled CPU backend: passes on a copy of the graph, one JIT module for all of its
// fusion groups, and the reference executor for everything else with the groups' kernels
// plugged in.
#include <chrono>
#include <sstream>
#include <unordered_map>

#include "kiln/backends/cpu_compiler.h"
#include "kiln/backends/interp.h"
#include "kiln/codegen/kernels.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/fused.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void collect_fused(const ir::Graph& g, std::vector<const ir::Node*>& out, int& other) {
  for (const auto& node : g.nodes()) {
    if (node->op == &ops::fused) {
      out.push_back(node.get());
      continue;
    }
    ++other;
    for (const auto& region : node->regions) collect_fused(*region, out, other);
  }
}

int64_t product(const Shape& shape, const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) n *= shape[static_cast<size_t>(d)];
  return n;
}

}  // namespace

std::string CompileStats::str() const {
  std::ostringstream os;
  os.precision(3);
  os << "passes " << passes.total_ms << " ms, codegen "
     << codegen_build_ms + codegen_lower_ms + codegen_llvm_ms << " ms (build " << codegen_build_ms
     << ", lower " << codegen_lower_ms << ", llvm " << codegen_llvm_ms << "); " << kernels
     << " kernels (" << fused_ops << " ops), " << other_nodes << " other nodes";
  if (!target.empty()) os << "; target " << target;
  return os.str();
}

// A generated kernel and what running it needs.
struct Kernel {
  codegen::KernelFn fn = nullptr;
  std::vector<std::vector<int>> dim_groups;  // output dims merged into each iteration dim
  std::string name;
};

struct CompiledGraph::Impl {
  std::shared_ptr<ir::Graph> graph;
  std::unique_ptr<codegen::KernelModule> module;
  std::unordered_map<const ir::Node*, Kernel> kernels;
  std::unique_ptr<interp::Executable> executor;

  void run_fused(const ir::Node& node, std::span<const Tensor> operands,
                 std::span<const int64_t> symbols, std::span<Tensor> results) const {
    const Kernel& k = kernels.at(&node);
    // Operands must be dense in their own shape; views (a transpose) are copied first.
    std::vector<Tensor> dense(operands.size());
    std::vector<void*> buffers;
    buffers.reserve(operands.size() + results.size());
    for (size_t i = 0; i < operands.size(); ++i) {
      dense[i] = operands[i].is_contiguous() ? operands[i] : operands[i].contiguous();
      buffers.push_back(dense[i].numel() ? dense[i].raw_data() : nullptr);
    }
    Shape shape;
    for (size_t j = 0; j < results.size(); ++j) {
      const ir::Type& t = node.outputs[j]->type;
      shape.clear();
      for (int64_t s : t.shape) shape.push_back(ir::substitute_size(s, symbols));
      results[j] = Tensor::empty(shape, t.dtype);
      buffers.push_back(results[j].numel() ? results[j].raw_data() : nullptr);
    }
    int64_t total = results.empty() ? 0 : results[0].numel();
    if (total == 0) return;
    std::vector<int64_t> dims(k.dim_groups.size());
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = product(shape, k.dim_groups[d]);
    int64_t inner = total / dims[0];
    void* const* args = buffers.data();
    const int64_t* sizes = dims.data();
    codegen::KernelFn fn = k.fn;
    parallel_for_fast(0, dims[0],
                      std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
                      [&](int64_t begin, int64_t end) { fn(args, sizes, begin, end); });
  }
};

CompiledGraph::CompiledGraph(const ir::Graph& graph, const CompilerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Clock::time_point start = Clock::now();
  impl_->graph = ir::clone_graph(graph);
  input_count_ = graph.inputs().size();
  passes::PipelineOptions pipeline_options;
  pipeline_options.verify_each = options.verify_passes;
  pipeline_options.print_after = options.print_after;
  pipeline_options.print_sink = options.print_sink;
  stats_.passes = passes::PassManager(options.pipeline, pipeline_options).run(*impl_->graph);

  std::vector<const ir::Node*> fused;
  collect_fused(*impl_->graph, fused, stats_.other_nodes);
  std::vector<codegen::ElementwiseKernelSpec> specs;
  for (size_t i = 0; i < fused.size(); ++i) {
    specs.push_back(codegen::elementwise_spec(*fused[i], "fused_" + std::to_string(i)));
    stats_.fused_ops += static_cast<int>(fused[i]->regions.at(0)->nodes().size());
  }
  stats_.kernels = static_cast<int>(specs.size());
  if (!specs.empty()) {
    impl_->module = codegen::compile_kernels(specs);
    const codegen::CodegenTimings& t = impl_->module->timings();
    stats_.codegen_build_ms = t.build_ms;
    stats_.codegen_lower_ms = t.lower_ms;
    stats_.codegen_llvm_ms = t.llvm_ms;
    stats_.target = impl_->module->target();
    for (size_t i = 0; i < fused.size(); ++i)
      impl_->kernels[fused[i]] = {impl_->module->lookup(specs[i].name),
                                  codegen::elementwise_dim_groups(*fused[i]), specs[i].name};
  }
  impl_->executor = std::make_unique<interp::Executable>(impl_->graph);
  Impl* impl = impl_.get();
  impl_->executor->set_fused_runner(
      [impl](const ir::Node& node, std::span<const Tensor> operands,
             std::span<const int64_t> symbols,
             std::span<Tensor> results) { impl->run_fused(node, operands, symbols, results); });
  stats_.total_ms = ms_since(start);
}

CompiledGraph::~CompiledGraph() = default;

std::vector<Tensor> CompiledGraph::run(std::span<const Tensor> inputs) {
  size_t total = impl_->graph->inputs().size();
  if (inputs.size() == total) return impl_->executor->run(inputs);
  // Constant folding appended constants the caller does not know about: the graph holds them.
  KILN_CHECK(inputs.size() == input_count_, "[cpu] graph ", impl_->graph->name(), " expected ",
             input_count_, " inputs, got ", inputs.size(), ".");
  std::vector<Tensor> all(inputs.begin(), inputs.end());
  all.resize(total);
  return impl_->executor->run(all);
}

const ir::Graph& CompiledGraph::optimized_graph() const {
  return *impl_->graph;
}

void CompiledGraph::set_replay_recorded_random(bool replay) {
  impl_->executor->set_replay_recorded_random(replay);
}

}  // namespace kiln::cpu
