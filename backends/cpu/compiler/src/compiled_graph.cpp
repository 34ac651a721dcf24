// The compiled CPU backend: passes on a copy of the graph, one JIT module for all of its
// fusion groups, and the planned executor (plan.h) to run them with the other nodes' eager
// kernels; graphs with control flow run on the reference executor's node loop, with the
// groups' kernels plugged in.
#include <chrono>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "kiln/backends/cpu_compiler.h"
#include "kiln/backends/interp.h"
#include "kiln/codegen/kernels.h"
#include "kiln/cpu_exec/plan.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/fused.h"

namespace kiln::cpu {

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

struct CompiledGraph::Impl {
  std::shared_ptr<ir::Graph> graph;
  std::unique_ptr<codegen::KernelModule> module;
  std::unordered_map<const ir::Node*, FusedKernel> kernels;
  std::unique_ptr<Plan> plan;  // null for graphs with control flow, which run on `executor`
  std::unique_ptr<interp::Executable> executor;

  // A plan's buffers belong to one call at a time: concurrent calls each take an idle plan
  // (the first is `plan`), or build one, and give it back. `extra_plans` owns the plans
  // built for concurrent calls; each has its own packed weights.
  std::mutex mutex;
  std::vector<Plan*> idle;
  std::vector<std::unique_ptr<Plan>> extra_plans;
  bool replay_recorded_random = false;

  Plan* take_plan() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!idle.empty()) {
      Plan* p = idle.back();
      idle.pop_back();
      return p;
    }
    extra_plans.push_back(Plan::build(*graph, kernels));
    extra_plans.back()->set_replay_recorded_random(replay_recorded_random);
    return extra_plans.back().get();
  }
  void give_back(Plan* p) {
    std::lock_guard<std::mutex> lock(mutex);
    idle.push_back(p);
  }
};

CompiledGraph::CompiledGraph(const ir::Graph& graph, const CompilerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Clock::time_point start = Clock::now();
  impl_->graph = ir::clone_graph(graph);
  input_count_ = graph.inputs().size();
  passes::PipelineOptions pipeline_options;
  for (size_t i = 0; i < options.frozen_state.size() && i < input_count_; ++i) {
    ir::GraphInput& in = impl_->graph->mutable_inputs()[i];
    bool state = in.kind == ir::InputKind::Parameter || in.kind == ir::InputKind::Buffer;
    if (!state || !options.frozen_state[i].defined()) continue;
    in.constant = options.frozen_state[i].contiguous();
    ++stats_.frozen_parameters;
  }
  pipeline_options.context.parameters_frozen = stats_.frozen_parameters > 0;
  pipeline_options.verify_each = options.verify_passes;
  pipeline_options.print_after = options.print_after;
  pipeline_options.print_sink = options.print_sink;
  stats_.passes = passes::PassManager(options.pipeline, pipeline_options).run(*impl_->graph);

  std::vector<const ir::Node*> fused = fused_nodes(*impl_->graph);
  stats_.other_nodes = count_other_nodes(*impl_->graph);
  std::vector<codegen::FusedKernelSpec> specs;
  for (size_t i = 0; i < fused.size(); ++i) {
    specs.push_back(codegen::fused_kernel_spec(*fused[i], fused_kernel_name(i)));
    stats_.fused_ops += static_cast<int>(fused[i]->regions.at(0)->nodes().size());
  }
  stats_.kernels = static_cast<int>(specs.size());
  if (!specs.empty()) {
    codegen::CodegenOptions codegen_options;
    codegen_options.cache_dir = codegen::default_cache_dir();  // a hit skips lowering and LLVM
    codegen_options.position_independent = options.position_independent;
    codegen_options.host_cpu_features = options.host_cpu_features;
    impl_->module = codegen::compile_kernels(specs, codegen_options);
    const codegen::CodegenTimings& t = impl_->module->timings();
    stats_.codegen_build_ms = t.build_ms;
    stats_.codegen_lower_ms = t.lower_ms;
    stats_.codegen_llvm_ms = t.llvm_ms;
    stats_.codegen_load_ms = t.load_ms;
    stats_.target = impl_->module->target();
    stats_.cache = impl_->module->cache_note();
    codegen::KernelModule* module = impl_->module.get();
    impl_->kernels = bind_fused_kernels(
        *impl_->graph, [module](const std::string& name) { return module->lookup(name); });
  }
  impl_->plan = Plan::build(*impl_->graph, impl_->kernels);
  stats_.planned = impl_->plan != nullptr;
  stats_.epilogues = impl_->plan ? impl_->plan->epilogues() : 0;
  stats_.packed_weights = impl_->plan ? impl_->plan->packed_weights() : 0;
  stats_.image_chains = impl_->plan ? impl_->plan->image_chains() : 0;
  if (impl_->plan) {
    stats_.memory = impl_->plan->symbolic_sizes() ? "buffers planned per input size"
                                                  : impl_->plan->memory().str();
    impl_->idle.push_back(impl_->plan.get());
  } else {
    impl_->executor = std::make_unique<interp::Executable>(impl_->graph);
    Impl* impl = impl_.get();
    impl_->executor->set_fused_runner([impl](const ir::Node& node, std::span<const Tensor> operands,
                                             std::span<const int64_t> symbols,
                                             std::span<Tensor> results) {
      run_fused_kernel(impl->kernels.at(&node), node, operands, symbols, results, false);
    });
  }
  stats_.total_ms = ms_since(start);
}

CompiledGraph::~CompiledGraph() = default;

int64_t CompiledGraph::weight_packs() const {
  if (!impl_->plan) return 0;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  int64_t packs = impl_->plan->weight_packs();
  for (const auto& p : impl_->extra_plans) packs += p->weight_packs();
  return packs;
}

std::vector<Tensor> CompiledGraph::run(std::span<const Tensor> inputs) {
  size_t total = impl_->graph->inputs().size();
  KILN_CHECK(inputs.size() == input_count_ || inputs.size() == total, "[cpu] graph ",
             impl_->graph->name(), " expected ", input_count_, " inputs, got ", inputs.size(), ".");
  // Constant folding may have appended constants the caller does not know about: the plan
  // reads them from the graph; the reference executor wants every input slot.
  if (impl_->plan) {
    Plan* plan = impl_->take_plan();
    struct GiveBack {
      Impl* impl;
      Plan* plan;
      ~GiveBack() { impl->give_back(plan); }
    } give_back{impl_.get(), plan};
    return plan->run(inputs);
  }
  std::vector<Tensor> all(inputs.begin(), inputs.end());
  all.resize(total);
  std::lock_guard<std::mutex> lock(impl_->mutex);  // the node loop: one call at a time
  return impl_->executor->run(all);
}

const codegen::KernelModule* CompiledGraph::kernel_module() const {
  return impl_->module.get();
}

const ir::Graph& CompiledGraph::optimized_graph() const {
  return *impl_->graph;
}

void CompiledGraph::set_replay_recorded_random(bool replay) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->replay_recorded_random = replay;
  if (impl_->plan) impl_->plan->set_replay_recorded_random(replay);
  for (const auto& p : impl_->extra_plans) p->set_replay_recorded_random(replay);
  if (impl_->executor) impl_->executor->set_replay_recorded_random(replay);
}

}  // namespace kiln::cpu
