// The node loop with GPU fusion groups: each group's operands made dense on its device, its
// results allocated there, its iteration dims computed from this call's sizes, and one launch.
#include "kiln/cuda/exec/graph_runner.h"

#include <cstdlib>
#include <string>

#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/cpu/exec/plan.h"
#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/interp/interp.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/view.h"
#include "kiln/ops/to_device.h"

namespace kiln::cuda::exec {

namespace {
// The fusion groups this thread launched through any runner, and the kernel launches the
// launcher counted for them (none for emulated kernels): a run's own are the difference.
struct GroupLaunches {
  uint64_t groups = 0;
  uint64_t kernels = 0;
};
thread_local GroupLaunches group_launches;

void collect_gemm_groups(const ir::Graph& g, std::unordered_map<const ir::Node*, GemmGroup>& out) {
  for (const auto& node : g.nodes()) {
    if (std::optional<GemmGroup> gemm = gemm_group(*node)) {
      out[node.get()] = *gemm;
      continue;
    }
    for (const auto& region : node->regions) collect_gemm_groups(*region, out);
  }
}
}  // namespace

std::vector<FusedKernelInfo> fused_kernel_infos(const ir::Graph& graph) {
  std::vector<FusedKernelInfo> infos;
  std::vector<const ir::Node*> fused = cpu::exec::fused_nodes(graph);
  for (size_t i = 0; i < fused.size(); ++i) {
    const ir::Node& node = *fused[i];
    FusedKernelInfo info;
    info.name = cpu::exec::fused_kernel_name(i);
    info.kind = static_cast<const ops::FusedAttrs&>(*node.attrs).kind == "row"
                    ? FusedKernelKind::Rows
                    : FusedKernelKind::Elementwise;
    info.buffers = node.inputs.size() + node.outputs.size();
    info.dims = cpu::exec::fused_dim_groups(node).size();
    infos.push_back(std::move(info));
  }
  return infos;
}

GraphRunner::GraphRunner(std::shared_ptr<const ir::Graph> graph, FusedLauncher launch,
                         size_t caller_inputs)
    : graph_(std::move(graph)), launch_(std::move(launch)), caller_inputs_(caller_inputs) {
  KILN_CHECK(graph_ != nullptr, "[cuda] GraphRunner expected a graph, got null.");
  std::vector<const ir::Node*> fused = cpu::exec::fused_nodes(*graph_);
  for (size_t i = 0; i < fused.size(); ++i)
    groups_[fused[i]] = {cpu::exec::fused_kernel_name(i), cpu::exec::fused_iteration_shape(*fused[i]),
                         cpu::exec::fused_dim_groups(*fused[i])};
  collect_gemm_groups(*graph_, gemm_groups_);
  node_loop_ = std::make_unique<interp::Executable>(graph_);
  node_loop_->set_fused_runner([this](const ir::Node& node, std::span<const Tensor> operands,
                                      std::span<const int64_t> symbols, std::span<Tensor> results) {
    run_group(node, operands, symbols, results);
  });
  set_device_plan(true);
  const char* graphs = std::getenv("KILN_CUDA_GRAPHS");
  set_graph_replay(!(graphs && std::string(graphs) == "0"));
}

GraphRunner::~GraphRunner() = default;

void GraphRunner::set_replay_recorded_random(bool replay) {
  node_loop_->set_replay_recorded_random(replay);
  fresh_random_ = !replay;
  if (replay_) set_graph_replay(true);  // fixed positions may be replayed
}

void GraphRunner::set_device_plan(bool on) {
  plan_ = on ? DevicePlan::build(*graph_,
                                 [this](const ir::Node& node, std::span<const Tensor> operands,
                                        std::span<const int64_t> symbols,
                                        std::span<Tensor> results) {
                                   run_group(node, operands, symbols, results);
                                 })
             : nullptr;
}

void GraphRunner::set_graph_replay(bool on) {
  replay_ = on ? std::make_unique<GraphReplay>(*graph_, fresh_random_) : nullptr;
}

std::vector<Tensor> GraphRunner::run(std::span<const Tensor> inputs) {
  const size_t total = graph_->inputs().size();
  KILN_CHECK(inputs.size() == total || (caller_inputs_ && inputs.size() == caller_inputs_),
             "[cuda] graph ", graph_->name(), " expected ", caller_inputs_ ? caller_inputs_ : total,
             " inputs, got ", inputs.size(), ".");
  if (!replay_) return run_nodes(inputs);
  return replay_->run(inputs, [this](std::span<const Tensor> in) { return run_nodes(in); });
}

std::vector<Tensor> GraphRunner::run_nodes(std::span<const Tensor> inputs) {
  const size_t total = graph_->inputs().size();
  std::call_once(constants_placed_, [this] {
    placed_constants_.resize(graph_->inputs().size());
    for (size_t i = 0; i < placed_constants_.size(); ++i) {
      const ir::GraphInput& in = graph_->inputs()[i];
      if (in.kind != ir::InputKind::Constant || !in.constant.defined() ||
          in.constant.device() == in.value->type.device)
        continue;
      ops::ToDeviceAttrs to;
      to.device = in.value->type.device;
      placed_constants_[i] = dispatch1(ops::to_device, TensorSpan(&in.constant, 1), to);
    }
  });
  // The node loop wants every input slot; the graph holds the data of those left undefined.
  std::vector<Tensor> all(inputs.begin(), inputs.end());
  all.resize(total);
  for (size_t i = 0; i < total; ++i)
    if (!all[i].defined() && placed_constants_[i].defined()) all[i] = placed_constants_[i];
  const LaunchCounts before = launches_on_this_thread();
  const GroupLaunches groups_before = group_launches;
  std::vector<Tensor> out = plan_ ? plan_->run(all, fresh_random_) : node_loop_->run(all);
  const LaunchCounts after = launches_on_this_thread();
  generated_ = group_launches.groups - groups_before.groups;
  eager_ = (after.kernels - before.kernels) - (group_launches.kernels - groups_before.kernels);
  library_ = after.library_calls - before.library_calls;
  ran_ = true;
  return out;
}

std::string GraphRunner::launch_summary() const {
  if (!ran_) return "";
  const uint64_t generated = generated_, eager = eager_, library = library_;
  std::string counts = std::to_string(generated + eager + library) + " launches per call (" +
                       std::to_string(generated) + " generated kernels, " +
                       std::to_string(eager) + " eager kernels, " + std::to_string(library) +
                       " library calls)";
  const std::string memory = plan_ ? plan_->memory_summary() : "";
  if (!memory.empty()) counts += "; intermediates in one device arena: " + memory;
  const std::string replay = replay_ ? replay_->summary() : "";
  return replay.empty() ? counts : counts + "; " + replay;
}

void GraphRunner::run_group(const ir::Node& node, std::span<const Tensor> operands,
                            std::span<const int64_t> symbols, std::span<Tensor> results) const {
  if (auto gemm = gemm_groups_.find(&node); gemm != gemm_groups_.end()) {
    run_gemm_group(node, gemm->second, operands, symbols, results);
    return;
  }
  const Group& group = groups_.at(&node);
  const Device device = node.outputs.at(0)->type.device;
  // Operands dense on the group's device: a host scalar fed at run time (a graph-breaking
  // forward's segment takes `x * 2`'s 2 as an input) is copied over, a view copied dense.
  // The copies are freed in stream order, after the kernel has read them.
  SmallVector<Tensor, 8> dense(operands.size());
  SmallVector<void*, 12> buffers;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i];
    if (t.device() != device) {
      ops::ToDeviceAttrs to;
      to.device = device;
      dense[i] = dispatch1(ops::to_device, TensorSpan(&t, 1), to);
    } else {
      dense[i] = t.is_contiguous() ? t : dispatch1(ops::clone, TensorSpan(&t, 1));
    }
    buffers.push_back(dense[i].numel() ? dense[i].raw_data() : nullptr);
  }
  Shape shape;
  for (size_t j = 0; j < results.size(); ++j) {
    const ir::Type& t = node.outputs[j]->type;
    shape.clear();
    for (int64_t s : t.shape) shape.push_back(ir::substitute_size(s, symbols));
    if (!results[j].defined()) results[j] = Tensor::empty(shape, t.dtype, device);
    buffers.push_back(results[j].numel() ? results[j].raw_data() : nullptr);
  }
  shape.clear();
  for (int64_t s : group.iteration) shape.push_back(ir::substitute_size(s, symbols));
  SmallVector<int64_t, 6> dims;
  int64_t elements = 1;
  for (const std::vector<int>& merged : group.dim_groups) {
    int64_t size = 1;
    for (int d : merged) size *= shape[static_cast<size_t>(d)];
    dims.push_back(size);
    elements *= size;
  }
  if (elements == 0) return;  // nothing to compute: the results are empty
  const uint64_t kernels_before = launches_on_this_thread().kernels;
  launch_(group.kernel, buffers, dims);
  ++group_launches.groups;
  group_launches.kernels += launches_on_this_thread().kernels - kernels_before;
}

void GraphRunner::run_gemm_group(const ir::Node& node, const GemmGroup& gemm,
                                 std::span<const Tensor> operands,
                                 std::span<const int64_t> symbols,
                                 std::span<Tensor> results) const {
  const ir::Type& t = node.outputs.at(0)->type;
  Shape shape;
  for (int64_t s : t.shape) shape.push_back(ir::substitute_size(s, symbols));
  if (!results[0].defined()) results[0] = Tensor::empty(shape, t.dtype, t.device);
  GemmEpilogue epilogue;
  epilogue.activation = gemm.activation;
  if (gemm.bias) {
    const Tensor& bias = operands[2];
    epilogue.bias = bias.is_contiguous() ? bias : dispatch1(ops::clone, TensorSpan(&bias, 1));
  }
  if (operands[0].size(1) == 0) {
    // An empty sum, which cuBLASLt does not take: the epilogue of zeros, by the eager ops.
    Tensor y = dispatch1(ops::matmul, operands.subspan(0, 2));
    if (gemm.bias) {
      const Tensor sum[2] = {y, operands[2]};
      y = dispatch1(ops::add, TensorSpan(sum, 2));
    }
    if (gemm.activation == GemmActivation::Relu) y = dispatch1(ops::relu, TensorSpan(&y, 1));
    if (gemm.activation == GemmActivation::GeluTanh) {
      ops::GeluAttrs tanh;
      tanh.tanh_approximation = true;
      y = dispatch1(ops::gelu, TensorSpan(&y, 1), tanh);
    }
    results[0] = y;
    return;
  }
  matmul_with_epilogue(operands[0], operands[1], epilogue, results[0]);
}

}  // namespace kiln::cuda::exec
