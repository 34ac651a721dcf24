// A graph's nodes as a fixed schedule over one device arena per call (device_plan.h).
#include "kiln/cuda/exec/device_plan.h"

#include <algorithm>
#include <unordered_set>

#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/fused.h"

namespace kiln::cuda::exec {

namespace {
// Every value starts on a boundary cuBLASLt and vectorized loads are happy with (the caching
// allocator hands out blocks aligned the same way).
constexpr size_t kArenaAlignment = 256;

size_t align_up(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}
}  // namespace

struct DevicePlan::Step {
  const ir::Node* node = nullptr;
  KernelFn kernel = nullptr;      // an eager op's CUDA (or CPU) kernel; null for fusion groups
  bool symbolic_attrs = false;    // attributes hold symbols: substituted per call
  bool symbolic_types = false;    // output shapes hold symbols
  std::vector<int> inputs;        // value ids; -1 for an absent input
  std::vector<int> outputs;       // value ids
  std::vector<int> planned;       // by output: its index among the planned values, or -1
  std::vector<bool> skip;         // by output: optional and read by nothing: not computed
  TensorTypes types;              // output types (symbols substituted per call)
  std::vector<int> released;      // value ids no later step reads, let go of after this one
};

struct DevicePlan::Layout {
  cpu::exec::MemoryPlan memory;
  std::vector<size_t> offsets;  // by planned value: where it starts in the arena
  std::vector<Shape> shapes;    // by planned value, symbols substituted
  size_t arena_bytes = 0;
};

DevicePlan::DevicePlan(const ir::Graph& graph, GroupRunner run_group)
    : graph_(graph), run_group_(std::move(run_group)) {}

DevicePlan::~DevicePlan() = default;

std::unique_ptr<DevicePlan> DevicePlan::build(const ir::Graph& graph, GroupRunner run_group) {
  std::unique_ptr<DevicePlan> plan(new DevicePlan(graph, std::move(run_group)));
  int top = -1;
  for (const ir::GraphInput& in : graph.inputs()) top = std::max(top, in.value->id);
  std::vector<const ir::Node*> order;
  for (const auto& node : graph.nodes()) {
    if (!node->regions.empty() && node->op != &ops::fused) return nullptr;
    for (const ir::Value* v : node->outputs) top = std::max(top, v->id);
    order.push_back(node.get());
  }
  plan->value_count_ = static_cast<size_t>(top + 1);
  plan->symbol_sources_ = ir::symbol_sources(graph, "[cuda]");
  const cpu::exec::ScheduleLiveness liveness =
      cpu::exec::schedule_liveness(graph, order, plan->value_count_);
  std::unordered_set<int> returned;
  for (const ir::GraphOutput& o : graph.outputs()) returned.insert(o.value->id);

  std::vector<bool> planned(plan->value_count_, false);
  std::vector<int> plan_index(plan->value_count_, -1);
  for (size_t s = 0; s < order.size(); ++s) {
    const ir::Node& node = *order[s];
    const int index = static_cast<int>(s);
    Step step;
    step.node = &node;
    if (node.op != &ops::fused) {
      // The kernel dispatch would pick: the results' device's (a node without results runs
      // where its first input lives).
      Device device = kCUDA;
      if (!node.outputs.empty()) {
        device = node.outputs[0]->type.device;
      } else {
        for (const ir::Value* v : node.inputs)
          if (v) {
            device = v->type.device;
            break;
          }
      }
      step.kernel = node.op->kernels[static_cast<size_t>(device.type)];
      if (!step.kernel) return nullptr;  // the node loop's dispatch reports it
    }
    step.symbolic_attrs = ir::attrs_hold_symbols(*node.attrs);
    for (const ir::Value* v : node.inputs) step.inputs.push_back(v ? v->id : -1);
    std::vector<int> taken;  // inputs already written over by an output of this step
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ir::Value* v = node.outputs[k];
      const int id = v->id;
      step.outputs.push_back(id);
      step.types.push_back({v->type.dtype, v->type.shape, v->type.device});
      step.symbolic_types |= std::any_of(v->type.shape.begin(), v->type.shape.end(), ir::is_symbolic_size);
      const bool skip = ((node.op->optional_outputs >> k) & 1) && !liveness.escapes[id] &&
                        liveness.last_use[id] == index;
      step.skip.push_back(skip);
      // Memory of its own every call: what the caller receives or may alias, what a kernel
      // makes itself (views), what is not computed and what lives on the host.
      const bool in_arena = !liveness.escapes[id] && !node.op->kernel_makes_outputs && !skip &&
                            v->type.device.is_cuda();
      if (!in_arena) {
        step.planned.push_back(-1);
        continue;
      }
      cpu::exec::ValueLifetime lifetime;
      lifetime.def = index;
      lifetime.last_use = liveness.last_use[id];
      const int in = cpu::exec::inplace_input(node, index, v->type, liveness, planned, taken);
      if (in >= 0) {
        lifetime.inplace_of = plan_index[in];
        taken.push_back(in);
      }
      plan_index[id] = static_cast<int>(plan->planned_ids_.size());
      planned[id] = true;
      step.planned.push_back(plan_index[id]);
      plan->planned_ids_.push_back(id);
      plan->planned_types_.push_back(&v->type);
      plan->lifetimes_.push_back(lifetime);
    }
    plan->steps_.push_back(std::move(step));
  }
  // Each value is let go of after its last reader (views keep what they alias alive), so a
  // value outside the arena holds its memory no longer than eager code would.
  for (int id = 0; id < static_cast<int>(plan->value_count_); ++id) {
    const int last = liveness.last_use[id];
    if (last >= 0 && !returned.count(id)) plan->steps_[static_cast<size_t>(last)].released.push_back(id);
  }
  return plan;
}

std::shared_ptr<const DevicePlan::Layout> DevicePlan::layout_for(const ir::SymbolValues& symbols) {
  std::lock_guard<std::mutex> lock(layout_mutex_);
  if (layout_ && symbols == layout_symbols_) return layout_;
  auto layout = std::make_shared<Layout>();
  std::vector<cpu::exec::ValueLifetime> lifetimes = lifetimes_;
  for (size_t v = 0; v < lifetimes.size(); ++v) {
    Shape shape;
    for (int64_t s : planned_types_[v]->shape) shape.push_back(ir::substitute_size(s, symbols));
    lifetimes[v].bytes = static_cast<size_t>(numel(shape)) * itemsize(planned_types_[v]->dtype);
    layout->shapes.push_back(std::move(shape));
  }
  layout->memory = cpu::exec::plan_memory(lifetimes);
  std::vector<size_t> slot_offsets;
  for (size_t bytes : layout->memory.slot_bytes) {
    slot_offsets.push_back(layout->arena_bytes);
    layout->arena_bytes += align_up(bytes);
  }
  for (int slot : layout->memory.slot_of)
    layout->offsets.push_back(slot_offsets[static_cast<size_t>(slot)]);
  layout_ = layout;
  layout_symbols_ = symbols;
  return layout;
}

std::string DevicePlan::memory_summary() const {
  std::lock_guard<std::mutex> lock(layout_mutex_);
  return layout_ ? layout_->memory.str() : "";
}

std::vector<Tensor> DevicePlan::run(std::span<const Tensor> inputs, bool fresh_random) {
  const auto& graph_inputs = graph_.inputs();
  KILN_CHECK(inputs.size() == graph_inputs.size(), "[cuda] graph ", graph_.name(), " expected ",
             graph_inputs.size(), " inputs, got ", inputs.size(), ".");
  std::vector<Tensor> slots(value_count_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::GraphInput& in = graph_inputs[i];
    const bool own_constant = in.kind == ir::InputKind::Constant && !inputs[i].defined();
    slots[in.value->id] = own_constant ? in.constant : inputs[i];
  }
  const ir::SymbolValues symbols = ir::bind_symbols(symbol_sources_, inputs);
  ir::check_input_types(graph_, inputs, symbols, "[cuda]");
  const std::shared_ptr<const Layout> layout = layout_for(symbols);

  // The arena, freed in stream order once the last value placed in it is let go of.
  Tensor arena;
  char* base = nullptr;
  Device device = kCUDA;
  if (layout->arena_bytes > 0) {
    device = planned_types_.front()->device;
    arena = Tensor::empty({static_cast<int64_t>(layout->arena_bytes / sizeof(float))},
                          DType::Float32, device);
    base = static_cast<char*>(arena.raw_data());
  }
  auto placed = [&](int p) {
    const auto v = static_cast<size_t>(p);
    return Tensor::from_blob(base + layout->offsets[v], layout->shapes[v], planned_types_[v]->dtype,
                             {}, [arena](void*) {}, device);
  };

  SmallVector<Tensor, 4> args;
  SmallVector<Tensor, 2> results;
  TensorTypes resized;
  for (const Step& step : steps_) {
    const ir::Node& node = *step.node;
    args.clear();
    for (int id : step.inputs) args.push_back(id >= 0 ? slots[static_cast<size_t>(id)] : Tensor());
    results.clear();
    for (int p : step.planned) results.push_back(p >= 0 ? placed(p) : Tensor());
    if (!step.kernel) {
      run_group_(node, std::span<const Tensor>(args.data(), args.size()), symbols,
                 std::span<Tensor>(results.data(), results.size()));
    } else {
      const Attrs* attrs = node.attrs.get();
      std::unique_ptr<Attrs> fresh;
      const bool reseed = fresh_random && node.op->reseed;
      if (step.symbolic_attrs || reseed) {
        fresh = attrs->clone();
        if (step.symbolic_attrs)
          fresh->map_ints([&](int64_t v) { return ir::substitute_size(v, symbols); });
        if (reseed) node.op->reseed(*fresh, TensorSpan(args.data(), args.size()));
        attrs = fresh.get();
      }
      const TensorTypes* types = &step.types;
      if (step.symbolic_types) {
        resized = step.types;
        for (TensorType& t : resized)
          for (int64_t& s : t.shape) s = ir::substitute_size(s, symbols);
        types = &resized;
      }
      if (!node.op->kernel_makes_outputs)
        for (size_t k = 0; k < results.size(); ++k)
          if (!results[k].defined() && !step.skip[k])
            results[k] = Tensor::empty((*types)[k].shape, (*types)[k].dtype, (*types)[k].device);
      KernelCall call{*node.op, TensorSpan(args.data(), args.size()), *attrs,
                      std::span<Tensor>(results.data(), results.size()), *types};
      step.kernel(call);
    }
    for (size_t k = 0; k < step.outputs.size(); ++k)
      slots[static_cast<size_t>(step.outputs[k])] = std::move(results[k]);
    for (int id : step.released) slots[static_cast<size_t>(id)] = Tensor();
  }
  std::vector<Tensor> out;
  out.reserve(graph_.outputs().size());
  for (const ir::GraphOutput& o : graph_.outputs()) out.push_back(slots[o.value->id]);
  return out;
}

}  // namespace kiln::cuda::exec
