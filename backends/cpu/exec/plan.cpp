// The planned executor (plan.h): steps built once from the optimized graph, run per call
// over reusable buffers.
#include "kiln/cpu/exec/plan.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/pool.h"
#include "kiln/ops/view.h"
#include "kiln/thread_pool.h"
#include "packed_conv.h"
#include "packed_matmul.h"

namespace kiln::cpu::exec {

namespace {

// Rows [r0, r1) of `t` along dim 0, as a view. (Tensor::slice is a frontend method: the
// executor also runs in kiln_rt, without the frontend.)
Tensor rows_of(const Tensor& t, int64_t r0, int64_t r1) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  sizes[0] = r1 - r0;
  return t.alias(sizes, t.strides(), t.storage_offset() + r0 * t.strides()[0]);
}

int64_t product(const Shape& shape, const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) n *= shape[static_cast<size_t>(d)];
  return n;
}

bool shape_is_symbolic(const Shape& shape) {
  return std::any_of(shape.begin(), shape.end(), ir::is_symbolic_size);
}

// `buffer` when it already has this type (a reusable intermediate), else a new tensor.
Tensor buffer_for(Tensor& buffer, const Shape& shape, DType dtype, bool reuse) {
  if (reuse && buffer.defined() && buffer.dtype() == dtype && Shape(buffer.sizes()) == shape &&
      buffer.is_contiguous())
    return buffer;
  return Tensor::empty(shape, dtype);
}

// The graph's nodes in an order that puts each matmul and conv2d right before the first node
// that reads its result, where the nodes in between do not depend on it (they move before
// it, keeping their order): an eval batch_norm's per-feature scale, computed from parameters
// between a linear or convolution layer and the fusion group that reads its output, would
// otherwise keep the two from running as one epilogue step. Only the matmul or conv2d moves
// relative to nodes it does not feed, so random draws and side effects keep their order.
std::vector<const ir::Node*> epilogue_order(const ir::Graph& graph) {
  std::vector<const ir::Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i]->op != &ops::matmul && order[i]->op != &ops::conv2d) continue;
    std::unordered_set<const ir::Value*> dependent(order[i]->outputs.begin(),
                                                   order[i]->outputs.end());
    size_t reader = i + 1;
    for (; reader < order.size(); ++reader) {
      const std::vector<ir::Value*>& in = order[reader]->inputs;
      if (std::any_of(in.begin(), in.end(), [&](const ir::Value* v) { return dependent.count(v); }))
        break;
    }
    if (reader == order.size() || reader == i + 1) continue;
    // Nodes i+1 .. reader-1 read nothing the call produced: move the call just before reader.
    const ir::Node* call = order[i];
    std::move(order.begin() + static_cast<std::ptrdiff_t>(i) + 1,
              order.begin() + static_cast<std::ptrdiff_t>(reader),
              order.begin() + static_cast<std::ptrdiff_t>(i));
    order[reader - 1] = call;
    i = reader - 1;
  }
  return order;
}

}  // namespace

FusedLaunch prepare_fused_kernel(const FusedKernel& kernel, const ir::Node& node,
                                 std::span<const Tensor> operands, std::span<const int64_t> symbols,
                                 std::span<Tensor> results, bool reuse_results) {
  Shape shape;
  for (size_t j = 0; j < results.size(); ++j) {
    const ir::Type& t = node.outputs[j]->type;
    shape.clear();
    for (int64_t s : t.shape) shape.push_back(ir::substitute_size(s, symbols));
    results[j] = buffer_for(results[j], shape, t.dtype, reuse_results);
  }
  return prepare_fused_kernel_into(kernel, operands, symbols, results);
}

FusedLaunch prepare_fused_kernel_into(const FusedKernel& kernel, std::span<const Tensor> operands,
                                      std::span<const int64_t> symbols,
                                      std::span<const Tensor> results) {
  FusedLaunch launch;
  launch.fn = kernel.fn;
  // Operands must be dense in their own shape; views (a transpose) are copied first.
  launch.dense.resize(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    launch.dense[i] = operands[i].is_contiguous()
                          ? operands[i]
                          : dispatch1(ops::clone, std::span<const Tensor>(&operands[i], 1));
    launch.buffers.push_back(launch.dense[i].numel() ? launch.dense[i].raw_data() : nullptr);
  }
  for (const Tensor& r : results) launch.buffers.push_back(r.numel() ? r.raw_data() : nullptr);
  Shape shape;
  for (int64_t s : kernel.iteration) shape.push_back(ir::substitute_size(s, symbols));
  launch.total = results.empty() ? 0 : numel(shape);
  launch.dims.resize(kernel.dim_groups.size());
  for (size_t d = 0; d < launch.dims.size(); ++d)
    launch.dims[d] = product(shape, kernel.dim_groups[d]);
  return launch;
}

void FusedLaunch::run(int64_t begin, int64_t end) const {
  fn(buffers.data(), dims.data(), begin, end);
}

void run_fused_kernel(const FusedKernel& kernel, const ir::Node& node,
                      std::span<const Tensor> operands, std::span<const int64_t> symbols,
                      std::span<Tensor> results, bool reuse_results) {
  FusedLaunch launch =
      prepare_fused_kernel(kernel, node, operands, symbols, results, reuse_results);
  if (launch.total == 0) return;
  int64_t inner = launch.total / launch.dims[0];
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
  parallel_for_fast(0, launch.dims[0], grain,
                    [&](int64_t begin, int64_t end) { launch.run(begin, end); });
}

struct Plan::Step {
  const ir::Node* node = nullptr;
  const FusedKernel* fused = nullptr;  // a fusion group, else an eager kernel call
  KernelFn kernel = nullptr;
  std::unique_ptr<Attrs> attrs;      // the node's, redrawn (random ops) or resized per call
  bool reseed = false;               // a random op: a fresh stream position every call
  bool symbolic_attrs = false;       // attributes hold symbols: substituted per call
  bool symbolic_types = false;       // output shapes hold symbols
  std::vector<int> inputs, outputs;  // value ids; -1 for an absent input
  std::vector<bool> reuse;           // by output: its buffer may be reused next call
  std::vector<bool> skip;            // by output: optional and read by nothing: not computed
  TensorTypes types;                 // output types (symbols substituted per call)
  // A matmul whose product only a fusion group over the product's rows reads: the two run
  // together, block of rows by block of rows (run_with_epilogue). 1: the group is the next
  // step; 2: the next step views the product in another shape (a linear layer over a batch
  // of sequences flattens and unflattens) and the group after it reads that view.
  int epilogue_distance = 0;
  // A matmul by a 2-D float32 weight: its packed copy of the weight, kept between calls.
  std::unique_ptr<PackedMatmul> packed;
  // A conv2d by a float32 weight of the model's state: likewise (the direct convolution).
  std::unique_ptr<PackedConv> packed_conv;
  int chain = -1;  // the image chain (chains_) that starts at this step, or -1
  // A conv2d whose epilogue group is x [* scale] [+ shift] [relu] with per-channel operands:
  // the convolution's store applies it (gemm::ConvOutput) and the group's kernel never runs.
  std::optional<ChannelEpilogue> in_store;
};

// A run of per-image units, each reading the previous one's result: a conv2d through the
// direct convolution (with its epilogue group), a pooling. They run block of images by block
// of images, each thread on its own blocks, and the results between units live in buffers of
// one block per thread, so a CNN's activations stay in L2 from one layer to the next instead
// of going through memory (BatchNormCNN's first convolution writes 6.4 MiB at batch 64).
struct Plan::ChainUnit {
  size_t step = 0;  // the unit's step; its epilogue group is the next one
  bool epilogue = false;
  int input = -1, output = -1;  // value ids
};

struct Plan::Chain {
  std::vector<ChainUnit> units;
  size_t first = 0, last = 0;  // its steps
  int64_t batch = 0;           // images
  int64_t block = 1;           // images per block
  int64_t lanes = 1;           // blocks in flight (threads), as the buffers were planned
  std::vector<int> internal;   // values held one block per lane
};

Plan::Plan(const ir::Graph& graph) : graph_(graph) {}

std::optional<Plan::ChannelEpilogue> Plan::match_channel_epilogue(const Step& conv,
                                                                  const Step& group) {
  if (!group.fused || group.node->regions.size() != 1 || group.outputs.size() != 1)
    return std::nullopt;
  const ir::Type& out = conv.node->outputs[0]->type;
  if (out.dtype != DType::Float32 || out.shape.size() != 4 || group.node->outputs[0]->type != out)
    return std::nullopt;
  const ir::Graph& region = *group.node->regions[0];
  const auto& params = region.inputs();
  if (params.size() != group.inputs.size()) return std::nullopt;
  const ir::Value* current = nullptr;
  for (size_t k = 0; k < params.size(); ++k)
    if (group.inputs[k] == conv.outputs[0]) current = params[k].value;
  // A per-channel operand: [C, 1, 1] or [1, C, 1, 1] float32.
  auto channel_operand = [&](const ir::Value* v) -> int {
    for (size_t k = 0; k < params.size(); ++k) {
      if (params[k].value != v || group.inputs[k] == conv.outputs[0]) continue;
      const ir::Type& t = group.node->inputs[k]->type;
      const int64_t c = out.shape[1];
      const bool per_channel = t.shape == Shape{c, 1, 1} || t.shape == Shape{1, c, 1, 1};
      return t.dtype == DType::Float32 && per_channel ? static_cast<int>(k) : -1;
    }
    return -1;
  };
  ChannelEpilogue e;
  int stage = 0;  // 1: scaled, 2: shifted, 3: clipped
  for (const auto& node : region.nodes()) {
    if (!current || node->outputs.size() != 1 || node->outputs[0]->type != out) return std::nullopt;
    const auto& in = node->inputs;
    auto other = [&]() -> const ir::Value* {
      if (in.size() != 2) return nullptr;
      return in[0] == current ? in[1] : in[1] == current ? in[0] : nullptr;
    };
    if (node->op == &ops::mul && stage < 1 && (e.scale = channel_operand(other())) >= 0) {
      stage = 1;
    } else if (node->op == &ops::add && stage < 2 && (e.shift = channel_operand(other())) >= 0) {
      stage = 2;
    } else if (node->op == &ops::relu && stage < 3 && in.size() == 1 && in[0] == current) {
      e.relu = true;
      stage = 3;
    } else {
      return std::nullopt;
    }
    current = node->outputs[0];
  }
  const auto& yields = region.outputs();
  if (stage == 0 || yields.size() != 1 || yields[0].value != current) return std::nullopt;
  return e;
}

bool Plan::store_operands_dense(const Step& conv, const Step& group) const {
  if (!conv.in_store) return true;
  for (int k : {conv.in_store->scale, conv.in_store->shift}) {
    if (k < 0) continue;
    const Tensor& t = slots_[group.inputs[static_cast<size_t>(k)]];
    if (!t.defined() || !t.is_contiguous()) return false;
  }
  return true;
}

gemm::ConvOutput Plan::conv_output(const Step& conv, const Step* group) const {
  gemm::ConvOutput o;
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0)
    o.bias = slots_[conv.inputs[2]].data_ptr<float>();
  if (!conv.in_store || !group) return o;
  const ChannelEpilogue& e = *conv.in_store;
  auto operand = [&](int k) {
    return k < 0 ? nullptr : slots_[group->inputs[static_cast<size_t>(k)]].data_ptr<float>();
  };
  o.scale = operand(e.scale);
  o.shift = operand(e.shift);
  o.relu = e.relu;
  return o;
}

int Plan::epilogue_distance(const std::vector<Step>& steps, size_t s,
                            const std::vector<int>& last_use) {
  const Step& mm = steps[s];
  const bool conv = mm.node->op == &ops::conv2d && mm.packed_conv;
  if ((mm.node->op != &ops::matmul && !conv) || !mm.reuse[0] || s + 1 >= steps.size()) return 0;
  // The value the group reads: the product, or a view of it in the group's shape.
  const int product = mm.outputs[0];
  int distance = 1;
  int read = product;
  const Step& after = steps[s + 1];
  if (!conv && after.node->op == &ops::view && after.inputs[0] == product && s + 2 < steps.size()) {
    distance = 2;
    read = after.outputs[0];
  }
  // Nothing after the group reads the product (a read of its view counts as one of it).
  const Step& next = steps[s + distance];
  const int group = static_cast<int>(s) + distance;
  if (!next.fused || last_use[read] != group || last_use[product] != group) return 0;
  if (conv && match_channel_epilogue(mm, next)) return 1;  // the store applies it
  const Shape& shape = steps[s + distance - 1].node->outputs[0]->type.shape;
  if (!is_epilogue_pair(mm, next, shape)) return 0;
  return distance;
}

bool Plan::is_epilogue_pair(const Step& mm, const Step& next, const Shape& read_shape) {
  const ir::Type& product = mm.node->outputs[0]->type;
  if (product.shape.size() < 2 || !is_floating(product.dtype)) return false;
  // x [rows, ..., K] @ w [K, N]: blocks of x's leading dim make the same blocks of the
  // product (a linear layer over a batch of sequences, too). conv2d: blocks of images.
  const ir::Value* x = mm.node->inputs[0];
  const ir::Value* w = mm.node->inputs[1];
  const size_t weight_rank = mm.node->op == &ops::conv2d ? 4 : 2;
  if (!x || !w || w->type.shape.size() != weight_rank ||
      x->type.shape.size() != product.shape.size())
    return false;
  // The group iterates over what it reads (in the product's element order) and its first
  // iteration dim covers whole rows of the product, so a block of rows is a range of it.
  // Sizes may be symbolic: their encodings are products of primes, so divisibility holds
  // for every run-time size when it holds for them.
  for (const ir::Value* v : next.node->outputs)
    if (v->type.shape != read_shape) return false;
  const std::vector<int>& outer = next.fused->dim_groups.at(0);
  if (outer.empty() || outer.front() != 0 || next.fused->iteration != read_shape) return false;
  int64_t first = 1;
  for (int d : outer) first *= read_shape[static_cast<size_t>(d)];
  return product.shape[0] > 0 && first % product.shape[0] == 0;
}

Plan::~Plan() = default;

std::unique_ptr<Plan> Plan::build(const ir::Graph& graph,
                                  const std::unordered_map<const ir::Node*, FusedKernel>& kernels) {
  std::unique_ptr<Plan> plan(new Plan(graph));
  plan->symbol_sources_ = ir::symbol_sources(graph, "[cpu]");
  int top = -1;
  for (const ir::GraphInput& in : graph.inputs()) top = std::max(top, in.value->id);
  for (const auto& node : graph.nodes()) {
    if (!node->regions.empty() && node->op != &ops::fused) return nullptr;
    for (const ir::Value* v : node->outputs) {
      if (!v->type.device.is_cpu()) return nullptr;
      top = std::max(top, v->id);
    }
  }
  const std::vector<const ir::Node*> order = epilogue_order(graph);
  // Values the caller receives, and those they may alias (views of them), are made fresh
  // every call; every other buffer is reused. Lifetimes: a read of a view reads the values
  // it aliases.
  ScheduleLiveness liveness = schedule_liveness(graph, order, static_cast<size_t>(top + 1));
  const std::vector<bool>& escapes = liveness.escapes;
  std::vector<int>& last_use = liveness.last_use;
  const std::vector<std::vector<int>>& roots = liveness.roots;
  // Values that are the model's state (parameters, buffers, constants) or views of it: a
  // weight among them changes only through kiln's in-place ops, which bump its storage
  // version, so its packed copy can be kept between calls. (A plan buffer is rewritten
  // by generated kernels every call without a version bump: it is never cached.)
  std::vector<bool> model_state(static_cast<size_t>(top + 1), false);
  for (const ir::GraphInput& in : graph.inputs())
    model_state[in.value->id] = in.kind != ir::InputKind::Input;
  for (const auto& node : graph.nodes())
    if (node->op->kernel_makes_outputs && !node->inputs.empty() && node->inputs[0] &&
        model_state[node->inputs[0]->id])
      for (const ir::Value* v : node->outputs) model_state[v->id] = true;
  for (const ir::Node* node : order) {
    Step step;
    step.node = node;
    if (node->op == &ops::fused) {
      step.fused = &kernels.at(node);
    } else {
      step.kernel = node->op->kernels[static_cast<size_t>(DeviceType::CPU)];
      KILN_CHECK(step.kernel, "[cpu] ", node->op->name,
                 " has no CPU kernel registered. Fix: call kiln::init() before compiling "
                 "(kiln::compile does), or leave the op out of graphs for this backend.");
    }
    if (node->op == &ops::matmul && node->inputs.size() == 2 && node->inputs[1] &&
        node->inputs[1]->type.shape.size() == 2 &&
        node->inputs[1]->type.dtype == DType::Float32 && model_state[node->inputs[1]->id])
      step.packed = std::make_unique<PackedMatmul>();
    if (node->op == &ops::conv2d && node->inputs.size() >= 2 && node->inputs[1] &&
        node->inputs[1]->type.shape.size() == 4 && node->inputs[1]->type.dtype == DType::Float32 &&
        model_state[node->inputs[1]->id] && !ir::attrs_hold_symbols(*node->attrs))
      step.packed_conv = std::make_unique<PackedConv>();
    step.attrs = node->attrs->clone();
    step.reseed = node->op->reseed != nullptr;
    step.symbolic_attrs = ir::attrs_hold_symbols(*node->attrs);
    for (const ir::Value* v : node->inputs) step.inputs.push_back(v ? v->id : -1);
    for (const ir::Value* v : node->outputs) {
      step.outputs.push_back(v->id);
      bool reuse = !escapes[v->id] && !node->op->kernel_makes_outputs;
      step.reuse.push_back(reuse);
      if (!reuse) plan->transient_.push_back(v->id);
      step.types.push_back({v->type.dtype, v->type.shape, v->type.device});
      step.symbolic_types |= shape_is_symbolic(v->type.shape);
    }
    plan->steps_.push_back(std::move(step));
  }
  for (const ir::GraphInput& in : graph.inputs()) plan->transient_.push_back(in.value->id);
  plan->slots_.resize(static_cast<size_t>(top + 1));
  plan->shared_tensors_.resize(static_cast<size_t>(top + 1));

  const auto& steps = plan->steps_;
  // by step: the matmul whose epilogue it is, or -1
  std::vector<int> epilogue_of(steps.size(), -1);
  for (size_t s = 0; s + 1 < steps.size(); ++s) {
    int distance = epilogue_distance(steps, s, last_use);
    plan->steps_[s].epilogue_distance = distance;
    if (distance == 1 && plan->steps_[s].packed_conv)
      plan->steps_[s].in_store = match_channel_epilogue(steps[s], steps[s + 1]);
    if (distance) epilogue_of[s + static_cast<size_t>(distance)] = static_cast<int>(s);
  }
  // Outputs the kernel may leave out (OpDef::optional_outputs) that nothing reads get no
  // buffer and reach the kernel undefined.
  for (size_t s = 0; s < steps.size(); ++s) {
    Step& step = plan->steps_[s];
    step.skip.assign(step.outputs.size(), false);
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      const int id = step.outputs[k];
      step.skip[k] = ((step.node->op->optional_outputs >> k) & 1) && !escapes[id] &&
                     last_use[id] == static_cast<int>(s);
    }
  }
  // Image chains, and the lifetimes they need: every value a chain reads lives until its
  // last step and every value it writes from its first, as the chain's steps interleave.
  std::vector<int> chain_def(static_cast<size_t>(top + 1), -1);
  plan->find_chains(escapes, last_use);
  for (size_t c = 0; c < plan->chains_.size(); ++c) {
    const Chain& chain = plan->chains_[c];
    plan->steps_[chain.first].chain = static_cast<int>(c);
    for (size_t s = chain.first; s <= chain.last; ++s) {
      for (int id : steps[s].inputs) {
        if (id < 0) continue;
        last_use[id] = std::max(last_use[id], static_cast<int>(chain.last));
        for (int r : roots[id]) last_use[r] = std::max(last_use[r], static_cast<int>(chain.last));
      }
      for (int id : steps[s].outputs) chain_def[id] = static_cast<int>(chain.first);
    }
  }
  std::vector<int> shared_index(static_cast<size_t>(top + 1), -1);  // value id -> shared_
  std::vector<bool> planned(static_cast<size_t>(top + 1), false);   // has a shared_ entry
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<int> taken;  // inputs already given to an output of this step
    for (size_t k = 0; k < steps[s].outputs.size(); ++k) {
      if (!steps[s].reuse[k] || steps[s].skip[k]) continue;
      int id = steps[s].outputs[k];
      SharedValue value;
      value.id = id;
      // An epilogue's results are written while its matmul still reads its operands.
      bool epilogue = epilogue_of[s] >= 0 || chain_def[id] >= 0;
      value.lifetime.def = chain_def[id] >= 0    ? chain_def[id]
                           : epilogue_of[s] >= 0 ? epilogue_of[s]
                                                 : static_cast<int>(s);
      value.lifetime.last_use = last_use[id];
      value.type = &steps[s].node->outputs[k]->type;
      if (!epilogue) {
        int in = inplace_input(*steps[s].node, static_cast<int>(s), *value.type, liveness, planned,
                               taken);
        if (in >= 0) {
          value.lifetime.inplace_of = shared_index[in];
          taken.push_back(in);
        }
      }
      shared_index[id] = static_cast<int>(plan->shared_.size());
      planned[id] = true;
      plan->shared_.push_back(value);
    }
  }
  if (plan->symbol_sources_.empty()) plan->plan_buffers(ir::SymbolValues{});
  return plan;
}

void Plan::plan_buffers(const ir::SymbolValues& symbols) {
  std::vector<ValueLifetime> lifetimes;
  std::vector<Shape> shapes;
  // A chain's internal values hold one block of images per lane (thread).
  const int64_t threads = num_threads();
  for (Chain& chain : chains_) chain.lanes = std::clamp<int64_t>(threads, 1, chain.batch);
  for (SharedValue& value : shared_) {
    Shape shape;
    for (int64_t s : value.type->shape) shape.push_back(ir::substitute_size(s, symbols));
    if (const int c = chain_of_value_[static_cast<size_t>(value.id)]; c >= 0)
      shape[0] = chains_[static_cast<size_t>(c)].block * chains_[static_cast<size_t>(c)].lanes;
    value.lifetime.bytes = static_cast<size_t>(numel(shape)) * itemsize(value.type->dtype);
    lifetimes.push_back(value.lifetime);
    shapes.push_back(std::move(shape));
  }
  memory_ = plan_memory(lifetimes);
  buffers_.clear();
  for (size_t bytes : memory_.slot_bytes)  // float32 words: the allocator aligns to 64 bytes
    buffers_.push_back(Tensor::empty({static_cast<int64_t>((bytes + 3) / 4)}, DType::Float32));
  for (size_t v = 0; v < shared_.size(); ++v) {
    Tensor buffer = buffers_[static_cast<size_t>(memory_.slot_of[v])];
    void* data = buffer.numel() ? buffer.raw_data() : nullptr;
    shared_tensors_[shared_[v].id] =
        Tensor::from_blob(data, shapes[v], shared_[v].type->dtype, {}, [buffer](void*) {});
  }
  planned_for_ = symbols;
  planned_threads_ = threads;
  buffers_planned_ = true;
}

void Plan::run_step(Step& step, const ir::SymbolValues& symbols) {
  SmallVector<Tensor, 4> args;
  SmallVector<Tensor, 2> results;
  for (int id : step.inputs) args.push_back(id >= 0 ? slots_[id] : Tensor());
  results.resize(step.outputs.size());
  for (size_t k = 0; k < step.outputs.size(); ++k)
    results[k] = step.reuse[k] ? shared_tensors_[step.outputs[k]] : Tensor();
  if (step.fused) {
    run_fused_kernel(*step.fused, *step.node, TensorSpan(args.data(), args.size()), symbols,
                     std::span<Tensor>(results.data(), results.size()), true);
  } else if (step.packed && run_packed_matmul(step, args[0], args[1], results[0], symbols)) {
    // the product is in results[0]
  } else if (step.packed_conv && run_packed_conv(step, args, results[0], symbols, nullptr)) {
    // the convolution is in results[0]
  } else {
    const OpDef& op = *step.node->op;
    if (step.symbolic_attrs) {
      step.attrs = step.node->attrs->clone();
      step.attrs->map_ints([&](int64_t v) { return ir::substitute_size(v, symbols); });
    }
    if (step.reseed && !replay_recorded_random_)
      op.reseed(*step.attrs, TensorSpan(args.data(), args.size()));
    TensorTypes resized;  // only graphs with symbolic sizes pay for a copy
    if (step.symbolic_types) {
      resized = step.types;
      for (TensorType& t : resized)
        for (int64_t& s : t.shape) s = ir::substitute_size(s, symbols);
    }
    const TensorTypes& types = step.symbolic_types ? resized : step.types;
    if (op.kernel_makes_outputs) {
      for (Tensor& r : results) r = Tensor();
    } else {
      for (size_t k = 0; k < results.size(); ++k)
        results[k] = step.skip[k]
                         ? Tensor()
                         : buffer_for(results[k], types[k].shape, types[k].dtype, step.reuse[k]);
    }
    KernelCall call{op, TensorSpan(args.data(), args.size()), *step.attrs,
                    std::span<Tensor>(results.data(), results.size()), types};
    step.kernel(call);
  }
  for (size_t k = 0; k < step.outputs.size(); ++k) slots_[step.outputs[k]] = std::move(results[k]);
}

std::vector<Tensor> Plan::run(std::span<const Tensor> inputs) {
  const auto& graph_inputs = graph_.inputs();
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    const ir::GraphInput& in = graph_inputs[i];
    // Constants the passes appended come after the caller's inputs.
    bool given = i < inputs.size() && inputs[i].defined();
    KILN_CHECK(given || in.kind == ir::InputKind::Constant, "[cpu] graph ", graph_.name(),
               " expected input ", i, " ('", in.name, "'), got ", inputs.size(), " inputs.");
    slots_[in.value->id] = given ? inputs[i] : in.constant;
  }
  ir::SymbolValues symbols = ir::bind_symbols(symbol_sources_, inputs);
  ir::check_input_types(graph_, inputs, symbols, "[cpu]");
  if (!buffers_planned_ || symbols != planned_for_ ||
      (!chains_.empty() && planned_threads_ != num_threads()))
    plan_buffers(symbols);
  for (size_t index = 0; index < steps_.size(); ++index) {
    Step& step = steps_[index];
    if (step.chain >= 0 && run_chain(chains_[static_cast<size_t>(step.chain)], symbols)) {
      index = chains_[static_cast<size_t>(step.chain)].last;
      continue;
    }
    if (step.epilogue_distance == 2) {
      // The view of the product runs first: it only needs the product's buffer.
      slots_[step.outputs[0]] = shared_tensors_[step.outputs[0]];
      run_step(steps_[index + 1], symbols);
    }
    if (step.epilogue_distance &&
        run_with_epilogue(step, steps_[index + static_cast<size_t>(step.epilogue_distance)],
                          symbols)) {
      index += static_cast<size_t>(step.epilogue_distance);
      continue;
    }
    if (step.epilogue_distance == 2) {  // one block: the matmul, then the group (the view ran)
      run_step(step, symbols);
      ++index;
      continue;
    }
    run_step(step, symbols);
  }
  std::vector<Tensor> out;
  out.reserve(graph_.outputs().size());
  for (const ir::GraphOutput& o : graph_.outputs()) out.push_back(slots_[o.value->id]);
  // Only reusable buffers stay: inputs, results and views belong to the caller.
  for (int id : transient_) slots_[id] = Tensor();
  return out;
}

int Plan::epilogues() const {
  return static_cast<int>(std::count_if(steps_.begin(), steps_.end(),
                                        [](const Step& s) { return s.epilogue_distance > 0; }));
}

int Plan::packed_weights() const {
  return static_cast<int>(std::count_if(steps_.begin(), steps_.end(), [](const Step& s) {
    return s.packed != nullptr || s.packed_conv != nullptr;
  }));
}

int64_t Plan::weight_packs() const {
  int64_t packs = 0;
  for (const Step& s : steps_)
    packs += (s.packed ? s.packed->packs() : 0) + (s.packed_conv ? s.packed_conv->packs() : 0);
  return packs;
}

bool Plan::run_packed_matmul(Step& mm, const Tensor& x, const Tensor& w, Tensor& out,
                             const ir::SymbolValues& symbols) {
  Shape shape;
  for (int64_t s : mm.node->outputs[0]->type.shape) shape.push_back(ir::substitute_size(s, symbols));
  Tensor product = buffer_for(out, shape, DType::Float32, mm.reuse[0]);
  if (!PackedMatmul::applies(x, w, product)) return false;
  mm.packed->run(x, w, product);
  out = std::move(product);
  return true;
}

bool Plan::run_packed_conv(Step& conv, std::span<const Tensor> args, Tensor& out,
                           const ir::SymbolValues& symbols, const gemm::ImageEpilogue& epilogue) {
  Shape shape;
  for (int64_t s : conv.node->outputs[0]->type.shape)
    shape.push_back(ir::substitute_size(s, symbols));
  Tensor result = buffer_for(out, shape, DType::Float32, conv.reuse[0]);
  const Tensor bias = args.size() > 2 ? args[2] : Tensor();
  const auto& attrs = static_cast<const ops::Conv2dAttrs&>(*conv.attrs);
  if (!PackedConv::applies(args[0], args[1], bias, result, attrs)) return false;
  conv.packed_conv->run(args[0], args[1], bias, result, attrs, epilogue);
  out = std::move(result);
  return true;
}

FusedLaunch Plan::prepare_epilogue(const Step& epilogue, SmallVector<Tensor, 2>& results,
                                   const ir::SymbolValues& symbols) {
  SmallVector<Tensor, 8> operands;
  for (int id : epilogue.inputs) operands.push_back(id >= 0 ? slots_[id] : Tensor());
  results.resize(epilogue.outputs.size());
  for (size_t k = 0; k < epilogue.outputs.size(); ++k)
    results[k] = epilogue.reuse[k] ? shared_tensors_[epilogue.outputs[k]] : Tensor();
  return prepare_fused_kernel(*epilogue.fused, *epilogue.node,
                              TensorSpan(operands.data(), operands.size()), symbols,
                              std::span<Tensor>(results.data(), results.size()), true);
}

bool Plan::run_with_epilogue(Step& mm, Step& epilogue, const ir::SymbolValues& symbols) {
  if (mm.packed_conv) return run_conv_with_epilogue(mm, epilogue, symbols);
  Tensor a = slots_[mm.inputs[0]], b = slots_[mm.inputs[1]];
  Tensor product = shared_tensors_[mm.outputs[0]];
  const int64_t rows = product.size(0);
  const bool packed = mm.packed && PackedMatmul::applies(a, b, product);
  const int64_t threads = num_threads();
  if (!packed && (threads < 2 || rows < 2)) return false;  // the two steps run one by one
  slots_[mm.outputs[0]] = product;
  SmallVector<Tensor, 2> results;
  FusedLaunch launch = prepare_epilogue(epilogue, results, symbols);
  auto keep_results = [&] {
    for (size_t k = 0; k < epilogue.outputs.size(); ++k)
      slots_[epilogue.outputs[k]] = std::move(results[k]);
  };
  // Iteration dim 0 is the rows, or the rows and columns merged.
  const int64_t per_row = launch.dims[0] / rows;
  // The packed GEMM hands over rows of the product flattened to [x rows, N]; the epilogue
  // can take them as they complete when each such row is a whole number of its units.
  const int64_t flat_rows = packed ? a.numel() / a.size(-1) : 0;
  if (packed && launch.dims[0] % flat_rows == 0) {
    const int64_t units = launch.dims[0] / flat_rows;
    mm.packed->run(a, b, product,
                   [&](int64_t r0, int64_t r1) { launch.run(r0 * units, r1 * units); });
    keep_results();
    return true;
  }
  if (packed) {  // the product first, then the whole epilogue
    mm.packed->run(a, b, product);
  } else {
    // One GEMM call per block (the library packs the weight once per call). Each thread
    // takes whole blocks; a thread's rows are split further only while a block keeps at
    // least kMinBlockRows rows, so packing stays a small part of each call, and the
    // epilogue of a block reads it while it is in cache.
    constexpr int64_t kMinBlockRows = 128;
    constexpr int64_t kBlockBytes = int64_t{1} << 20;
    const int64_t per_thread = (rows + threads - 1) / threads;
    const int64_t row_bytes = product.numel() / rows * static_cast<int64_t>(itemsize(product.dtype()));
    const int64_t split = std::clamp<int64_t>(per_thread * row_bytes / kBlockBytes, 1,
                                              std::max<int64_t>(1, per_thread / kMinBlockRows));
    const int64_t blocks = std::min<int64_t>(rows, threads * split);
    const OpDef& op = *mm.node->op;
    const int64_t rows_per_block = (rows + blocks - 1) / blocks;
    parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      for (int64_t block = first; block < last; ++block) {
        int64_t r0 = block * rows_per_block, r1 = std::min(rows, r0 + rows_per_block);
        if (r0 >= r1) continue;
        Tensor a_rows = rows_of(a, r0, r1), c_rows = rows_of(product, r0, r1);
        Tensor inputs[2] = {a_rows, b};
        TensorTypes types{{product.dtype(), Shape(c_rows.sizes()), product.device()}};
        KernelCall call{op, TensorSpan(inputs, 2), *mm.attrs, std::span<Tensor>(&c_rows, 1), types};
        mm.kernel(call);
        launch.run(r0 * per_row, r1 * per_row);
      }
    });
    keep_results();
    return true;
  }
  if (launch.total) {
    const int64_t inner = launch.total / launch.dims[0];
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
    parallel_for_fast(0, launch.dims[0], grain, [&](int64_t b0, int64_t b1) { launch.run(b0, b1); });
  }
  keep_results();
  return true;
}

bool Plan::run_conv_with_epilogue(Step& conv, Step& epilogue, const ir::SymbolValues& symbols) {
  SmallVector<Tensor, 3> args;
  for (int id : conv.inputs) args.push_back(id >= 0 ? slots_[id] : Tensor());
  Tensor out = shared_tensors_[conv.outputs[0]];
  const Tensor bias = args.size() > 2 ? args[2] : Tensor();
  // (A chain's internal buffer holds one block: outside the chain, the steps run one by one.)
  if (!out.defined() || out.size(0) != args[0].size(0) ||
      !PackedConv::applies(args[0], args[1], bias, out,
                           static_cast<const ops::Conv2dAttrs&>(*conv.attrs)))
    return false;  // the two steps run one by one
  if (conv.in_store) {
    // The store applies the group: the convolution writes the group's result.
    if (!store_operands_dense(conv, epilogue)) return false;
    Tensor result = buffer_for(shared_tensors_[epilogue.outputs[0]], Shape(out.sizes()),
                               DType::Float32, epilogue.reuse[0]);
    if (!result.is_contiguous() || result.size(0) != out.size(0)) return false;
    conv.packed_conv->run(args[0], args[1], result,
                          static_cast<const ops::Conv2dAttrs&>(*conv.attrs),
                          conv_output(conv, &epilogue));
    slots_[epilogue.outputs[0]] = std::move(result);
    return true;
  }
  slots_[conv.outputs[0]] = out;
  SmallVector<Tensor, 2> results;
  FusedLaunch launch = prepare_epilogue(epilogue, results, symbols);
  // Iteration dim 0 is the images, or the images and channels merged.
  const int64_t per_image = launch.dims[0] / out.size(0);
  run_packed_conv(conv, std::span<const Tensor>(args.data(), args.size()), out, symbols,
                  [&](int64_t n0, int64_t n1) { launch.run(n0 * per_image, n1 * per_image); });
  for (size_t k = 0; k < epilogue.outputs.size(); ++k)
    slots_[epilogue.outputs[k]] = std::move(results[k]);
  return true;
}

// ---- image chains ----

namespace {
// The internal bytes of a block: one lane's results between units stay in L2 (512 KiB is
// half of a Zen 4 core's, a quarter of Emerald Rapids').
constexpr int64_t kChainBlockBytes = 512 * 1024;
}  // namespace

int Plan::image_chains() const {
  return static_cast<int>(chains_.size());
}

bool Plan::chain_unit_at(size_t s, ChainUnit& unit) const {
  if (s >= steps_.size()) return false;
  const Step& step = steps_[s];
  if (step.symbolic_types || step.symbolic_attrs || step.node->outputs.empty()) return false;
  const Shape& out = step.node->outputs[0]->type.shape;
  if (out.empty()) return false;
  unit = ChainUnit{s, false, step.inputs.empty() ? -1 : step.inputs[0], step.outputs[0]};
  if (step.packed_conv) {
    if (step.epilogue_distance != 1) return true;
    // The epilogue: one result, every operand but the convolution broadcast along the images.
    const Step& group = steps_[s + 1];
    if (group.outputs.size() != 1 || group.symbolic_types) return false;
    for (size_t k = 0; k < group.inputs.size(); ++k) {
      if (group.inputs[k] == step.outputs[0] || group.inputs[k] < 0) continue;
      const Shape& t = group.node->inputs[k]->type.shape;
      if (t.size() >= out.size() && t[0] != 1) return false;
    }
    unit.epilogue = true;
    unit.output = group.outputs[0];
    return true;
  }
  if (step.node->op == &ops::max_pool2d) return step.skip.size() == 2 && step.skip[1];
  return step.node->op == &ops::avg_pool2d;
}

void Plan::find_chains(const std::vector<bool>& escapes, const std::vector<int>& last_use) {
  chain_of_value_.assign(escapes.size(), -1);
  auto images = [&](int id, const ChainUnit& u) {
    const ir::Node* n = steps_[u.step].node;
    for (const ir::Value* v : n->inputs)
      if (v && v->id == id) return v->type.shape.empty() ? int64_t{0} : v->type.shape[0];
    return int64_t{0};
  };
  for (size_t s = 0; s < steps_.size();) {
    Chain chain;
    ChainUnit unit;
    if (!chain_unit_at(s, unit)) {
      ++s;
      continue;
    }
    chain.units.push_back(unit);
    chain.batch = images(unit.input, unit);
    for (;;) {
      const ChainUnit& prev = chain.units.back();
      const size_t next = prev.step + (prev.epilogue ? 2 : 1);
      ChainUnit u;
      // The next unit reads the previous result, and nothing else reads it.
      if (!chain_unit_at(next, u) || u.input != prev.output || escapes[prev.output] ||
          last_use[prev.output] != static_cast<int>(u.step) || images(u.input, u) != chain.batch)
        break;
      chain.units.push_back(u);
    }
    const ChainUnit& end = chain.units.back();
    s = end.step + (end.epilogue ? 2 : 1);
    if (chain.units.size() < 2 || chain.batch < 2) continue;
    chain.first = chain.units.front().step;
    chain.last = s - 1;
    // Internal: every result but the last unit's, and every convolution read by its epilogue.
    int64_t bytes = 0;
    for (const ChainUnit& u : chain.units) {
      std::vector<int> values;
      if (&u != &end) values.push_back(u.output);
      if (u.epilogue) values.push_back(steps_[u.step].outputs[0]);
      for (int id : values) {
        const ir::Type* t = nullptr;
        for (size_t k = u.step; k <= u.step + (u.epilogue ? 1 : 0); ++k)
          for (const ir::Value* v : steps_[k].node->outputs)
            if (v->id == id) t = &v->type;
        chain.internal.push_back(id);
        bytes += numel(t->shape) / chain.batch * static_cast<int64_t>(itemsize(t->dtype));
      }
    }
    chain.block =
        std::clamp<int64_t>(kChainBlockBytes / std::max<int64_t>(bytes, 1), 1, chain.batch);
    for (int id : chain.internal)
      chain_of_value_[static_cast<size_t>(id)] = static_cast<int>(chains_.size());
    chains_.push_back(std::move(chain));
  }
}

bool Plan::run_chain(const Chain& chain, const ir::SymbolValues& symbols) {
  // Every convolution must take the direct path on these operands; its weight is packed
  // here, before the threads share it.
  for (const ChainUnit& u : chain.units) {
    Step& step = steps_[u.step];
    if (!step.packed_conv) continue;
    const Tensor x =
        u.input == chain.units.front().input ? slots_[u.input] : shared_tensors_[u.input];
    const Tensor bias =
        step.inputs.size() > 2 && step.inputs[2] >= 0 ? slots_[step.inputs[2]] : Tensor();
    const auto& attrs = static_cast<const ops::Conv2dAttrs&>(*step.attrs);
    Tensor probe = shared_tensors_[step.outputs[0]];
    if (!x.defined() || !PackedConv::applies(x, slots_[step.inputs[1]], bias, probe, attrs))
      return false;
    if (u.epilogue && !store_operands_dense(step, steps_[u.step + 1])) return false;
    step.packed_conv->prepare(slots_[step.inputs[1]], attrs);
  }
  const ChainUnit& end = chain.units.back();
  const Step& last_step = steps_[end.step + (end.epilogue ? 1 : 0)];
  Shape full;
  for (int64_t s : last_step.node->outputs[0]->type.shape)
    full.push_back(ir::substitute_size(s, symbols));
  Tensor result = buffer_for(shared_tensors_[end.output], full,
                             last_step.node->outputs[0]->type.dtype, last_step.reuse[0]);
  parallel_for(0, chain.lanes, 1, [&](int64_t l0, int64_t l1) {
    for (int64_t lane = l0; lane < l1; ++lane)
      for (int64_t n0 = lane * chain.block; n0 < chain.batch; n0 += chain.lanes * chain.block) {
        const int64_t n1 = std::min(chain.batch, n0 + chain.block), count = n1 - n0;
        // An internal value: this lane's block; the chain's result: its rows.
        auto block_of = [&](int id) {
          return chain_of_value_[static_cast<size_t>(id)] >= 0
                     ? rows_of(shared_tensors_[id], lane * chain.block, lane * chain.block + count)
                     : rows_of(result, n0, n1);
        };
        Tensor current = rows_of(slots_[chain.units.front().input], n0, n1);
        for (const ChainUnit& u : chain.units) {
          Step& step = steps_[u.step];
          if (step.packed_conv) {
            const bool group_in_store = u.epilogue && step.in_store;
            Tensor conv =
                u.epilogue && !group_in_store ? block_of(step.outputs[0]) : block_of(u.output);
            step.packed_conv->run(current, slots_[step.inputs[1]], conv,
                                  static_cast<const ops::Conv2dAttrs&>(*step.attrs),
                                  conv_output(step, u.epilogue ? &steps_[u.step + 1] : nullptr));
            current = conv;
            if (u.epilogue && !group_in_store) {
              const Step& group = steps_[u.step + 1];
              SmallVector<Tensor, 8> operands;
              for (int id : group.inputs)
                operands.push_back(id == step.outputs[0] ? conv : id >= 0 ? slots_[id] : Tensor());
              Tensor out = block_of(u.output);
              FusedLaunch launch = prepare_fused_kernel_into(
                  *group.fused, TensorSpan(operands.data(), operands.size()), symbols,
                  std::span<const Tensor>(&out, 1));
              launch.run(0, launch.dims[0] / chain.batch * count);
              current = out;
            }
            continue;
          }
          // A pooling, on this block's planes (max_pool2d's indices are unread).
          SmallVector<Tensor, 2> outs(step.outputs.size());
          outs[0] = block_of(u.output);
          TensorTypes types;
          for (size_t k = 0; k < step.outputs.size(); ++k) {
            Shape shape(step.types[k].shape);
            shape[0] = count;
            types.push_back({step.types[k].dtype, shape, step.types[k].device});
          }
          KernelCall call{*step.node->op, TensorSpan(&current, 1), *step.attrs,
                          std::span<Tensor>(outs.data(), outs.size()), types};
          step.kernel(call);
          current = outs[0];
        }
      }
  });
  for (int id : chain.internal) slots_[id] = shared_tensors_[id];
  slots_[end.output] = result;
  return true;
}

}  // namespace kiln::cpu::exec
