// decompose: splits softmax, log_softmax and layer_norm into row reductions (over the last
// dim, keepdim) and elementwise ops, so that fusion can put each row computation into one
// kernel together with the ops around it (attention's softmax(q.k * scale + mask) becomes
// one kernel instead of a kernel, a softmax call and a kernel); and an eval-mode batch_norm
// into a per-channel scale and shift, so its pass over x fuses with the ReLU after it.
//
// Algorithm: in every graph (regions included, except a `fused` node's: a group is already
// one kernel), each live node of these ops, on a float32/float64 tensor whose dtype and
// device the backend's FusionRules (PassContext::fusion) accept for the row reductions and
// elementwise ops it would become, that works on the last dim only becomes (r = rank - 1; sum and amax with dims=[r], keepdim=true):
//   softmax(x):      m = amax(x); d = x - m; e = exp(d); y = e * (1 / sum(e))
//   log_softmax(x):  m = amax(x); d = x - m; y = d - log(sum(exp(d)))
//   layer_norm(x, w?, b?) with normalized_shape = [C], C static:
//                    mean = sum(x) / C; xc = x - mean; var = sum(xc * xc) / C;
//                    rstd = rsqrt(var + eps); y = xc * rstd (* w) (+ b)
//   batch_norm(x, w?, b?, mean, var) in eval mode, x [N, C, ...] with C static:
//                    invstd = rsqrt(var + eps); scale = invstd (* w);
//                    shift = (b) - mean * scale; y = x * view(scale) + view(shift)
//                    (the views give [C, 1, ...] to broadcast over x's trailing dims), so
//                    the per-element part fuses with what follows (a ReLU) into one pass
// softmax is decomposed only when an elementwise op produces its input or reads its result:
// its row kernel computes exp twice (for the sum and for the result; storing the row would
// cost more than it saves), which only pays when fusion also saves a round trip through
// memory. A softmax alone stays the eager kernel, which stores exp(x - m) and rescales it.
// log_softmax (one exp) and layer_norm are at least as fast as their eager kernels when
// fused alone (docs/perf.md).
//
// These are the eager kernels' steps in their order (backends/cpu/kernels/softmax.cpp and
// norm.cpp), so results differ from them only in rounding. The new nodes replace the node's
// results in place and keep its module path and location. C and eps are rank-0 constants of
// x's dtype: Constant inputs in a top-level graph (one per dtype and value), `full` nodes
// in a region (isolated: it cannot read the graph's constants). Nodes made for results
// nobody reads (layer_norm's unused rstd chain) are removed again, and with them any
// constant left unread, so the pass leaves no dead code of its own.
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/symbols.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/norm.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/softmax.h"
#include "kiln/ops/view.h"
#include "kiln/passes/pass.h"
#include "liveness.h"
#include "pass_factories.h"

namespace kiln::passes {
namespace {

// Whether `n`'s operands and results are float32/float64 tensors whose pieces (row
// reductions, elementwise ops) the backend can fuse: decomposing pays only through fusion.
bool decomposable_types(const FusionRules& rules, const ir::Node& n) {
  auto fits = [&](const ir::Value* v) {
    if (!v) return true;
    DType dtype = v->type.dtype;
    Device device = v->type.device;
    return (dtype == DType::Float32 || dtype == DType::Float64) &&
           rules.can_fuse(ops::sum, dtype, device) && rules.can_fuse(ops::amax, dtype, device) &&
           rules.can_fuse(ops::exp, dtype, device);
  };
  for (const ir::Value* v : n.inputs)
    if (!fits(v)) return false;
  for (const ir::Value* v : n.outputs)
    if (!fits(v)) return false;
  return !n.inputs.empty() && n.inputs[0] && !n.outputs.empty();
}

// A last dim that a reduction may cover: amax has no identity, so a static size must be
// >= 1; a symbolic size is >= 2 (the tracer compiles sizes 0 and 1 as static ones).
bool reducible_last_dim(const Shape& shape) {
  return !shape.empty() && (ir::is_symbolic_size(shape.back()) || shape.back() >= 1);
}

// The rewrite of one graph: expansions go straight into the node list being rebuilt.
class GraphDecompose {
 public:
  GraphDecompose(ir::Graph& g, const FusionRules& rules) : g_(g), rules_(rules) {}

  // Returns how many nodes were decomposed; `made` grows by the nodes that replaced them.
  int run(int& made) {
    std::unordered_set<const ir::Node*> live = live_nodes(g_);
    for (const auto& node : g_.nodes())
      for (const ir::Value* v : node->inputs)
        if (v) readers_[v].push_back(node.get());
    std::vector<std::unique_ptr<ir::Node>> old = std::move(g_.mutable_nodes());
    g_.mutable_nodes().clear();
    int decomposed = 0;
    for (std::unique_ptr<ir::Node>& node : old) {
      if (live.count(node.get()) && expand(*node)) {
        ++decomposed;
        continue;
      }
      g_.mutable_nodes().push_back(std::move(node));
    }
    for (const auto& [from, to] : replaced_) g_.replace_uses(from, to);
    remove_unread();
    made += static_cast<int>(created_.size());
    return decomposed;
  }

 private:
  bool expand(const ir::Node& n) {
    if (!decomposable_types(rules_, n)) return false;
    if (n.op == &ops::softmax || n.op == &ops::log_softmax) return expand_softmax(n);
    if (n.op == &ops::layer_norm) return expand_layer_norm(n);
    if (n.op == &ops::batch_norm) return expand_batch_norm(n);
    return false;
  }

  bool expand_softmax(const ir::Node& n) {
    ir::Value* x = n.inputs[0];
    const Shape& shape = x->type.shape;
    auto rank = static_cast<int64_t>(shape.size());
    int64_t dim = static_cast<const ops::SoftmaxAttrs&>(*n.attrs).dim;
    if (dim < 0) dim += rank;
    if (dim != rank - 1 || !reducible_last_dim(shape)) return false;
    if (n.op == &ops::softmax && !has_elementwise_neighbour(n)) return false;
    origin_ = &n;
    const ir::Type& xt = x->type;
    ir::Value* m = reduce(ops::amax, x);
    ir::Value* d = emit(ops::sub, {x, m}, xt);
    ir::Value* y;
    if (n.op == &ops::softmax) {
      // One division per row and a multiply per element, as the eager kernel does.
      ir::Value* e = emit(ops::exp, {d}, xt);
      ir::Value* s = reduce(ops::sum, e);
      ir::Value* r = emit(ops::div, {constant(xt.dtype, 1.0), s}, s->type);
      y = emit(ops::mul, {e, r}, xt);
    } else {
      ir::Value* s = reduce(ops::sum, emit(ops::exp, {d}, xt));
      y = emit(ops::sub, {d, emit(ops::log, {s}, s->type)}, xt);
    }
    replaced_.emplace_back(n.outputs[0], y);
    return true;
  }

  bool expand_layer_norm(const ir::Node& n) {
    const auto& a = static_cast<const ops::LayerNormAttrs&>(*n.attrs);
    ir::Value* x = n.inputs[0];
    const ir::Type& xt = x->type;
    if (a.normalized_shape.size() != 1 || xt.shape.empty()) return false;
    int64_t c = a.normalized_shape[0];
    if (ir::is_symbolic_size(c) || c < 1 || xt.shape.back() != c) return false;
    origin_ = &n;
    ir::Value* count = constant(xt.dtype, static_cast<double>(c));
    ir::Value* mean = emit(ops::div, {reduce(ops::sum, x), count}, row_type(xt));
    ir::Value* xc = emit(ops::sub, {x, mean}, xt);
    ir::Value* var =
        emit(ops::div, {reduce(ops::sum, emit(ops::mul, {xc, xc}, xt)), count}, mean->type);
    ir::Value* eps = constant(xt.dtype, a.eps);
    ir::Value* rstd = emit(ops::rsqrt, {emit(ops::add, {var, eps}, var->type)}, var->type);
    ir::Value* y = emit(ops::mul, {xc, rstd}, xt);
    if (ir::Value* w = n.inputs.size() > 1 ? n.inputs[1] : nullptr) y = emit(ops::mul, {y, w}, xt);
    if (ir::Value* b = n.inputs.size() > 2 ? n.inputs[2] : nullptr) y = emit(ops::add, {y, b}, xt);
    replaced_.emplace_back(n.outputs[0], y);
    replaced_.emplace_back(n.outputs[1], mean);
    replaced_.emplace_back(n.outputs[2], rstd);
    return true;
  }

  // Whether an elementwise op (one fusion could put into the row kernel) produces n's input
  // or reads its result.
  bool has_elementwise_neighbour(const ir::Node& n) const {
    auto elementwise = [](const ir::Node* m) {
      return m && m->op->lowering == LoweringClass::Elementwise && m->op->scalar_body;
    };
    if (elementwise(n.inputs[0]->producer)) return true;
    auto it = readers_.find(n.outputs[0]);
    if (it == readers_.end()) return false;
    for (const ir::Node* reader : it->second)
      if (elementwise(reader)) return true;
    return false;
  }

  bool expand_batch_norm(const ir::Node& n) {
    const auto& a = static_cast<const ops::BatchNormAttrs&>(*n.attrs);
    if (a.training || n.inputs.size() != 5 || !n.inputs[3] || !n.inputs[4]) return false;
    ir::Value* x = n.inputs[0];
    const ir::Type& xt = x->type;
    if (xt.shape.size() < 2 || ir::is_symbolic_size(xt.shape[1]) || xt.shape[1] < 1) return false;
    origin_ = &n;
    ir::Value* mean = n.inputs[3];
    const ir::Type& ct = mean->type;  // [C]
    ir::Value* invstd =
        emit(ops::rsqrt, {emit(ops::add, {n.inputs[4], constant(xt.dtype, a.eps)}, ct)}, ct);
    ir::Value* scale = n.inputs[1] ? emit(ops::mul, {n.inputs[1], invstd}, ct) : invstd;
    ir::Value* moved = emit(ops::mul, {mean, scale}, ct);
    ir::Value* shift =
        n.inputs[2] ? emit(ops::sub, {n.inputs[2], moved}, ct) : emit(ops::neg, {moved}, ct);
    ir::Value* y = emit(
        ops::add, {emit(ops::mul, {x, per_channel(scale, xt)}, xt), per_channel(shift, xt)}, xt);
    replaced_.emplace_back(n.outputs[0], y);
    replaced_.emplace_back(n.outputs[1], mean);
    replaced_.emplace_back(n.outputs[2], invstd);
    return true;
  }

  // A [C] value viewed as [C, 1, ...] so it broadcasts along dim 1 of `x` (as is for rank 2).
  ir::Value* per_channel(ir::Value* v, const ir::Type& x) {
    if (x.shape.size() == 2) return v;
    ops::ShapeAttrs attrs;
    attrs.shape = Shape(x.shape.size() - 1, 1);
    attrs.shape[0] = x.shape[1];
    ir::Type t = v->type;
    t.shape = attrs.shape;
    return emit(ops::view, attrs, {v}, t);
  }

  static ir::Type row_type(const ir::Type& t) {
    ir::Type out = t;
    out.shape.back() = 1;
    return out;
  }

  // sum or amax over the last dim, keepdim.
  ir::Value* reduce(const OpDef& op, ir::Value* x) {
    ops::ReduceAttrs attrs;
    attrs.dims = {static_cast<int64_t>(x->type.shape.size()) - 1};
    attrs.keepdim = true;
    return emit(op, attrs, {x}, row_type(x->type));
  }

  ir::Value* emit(const OpDef& op, std::vector<ir::Value*> inputs, const ir::Type& type) {
    return emit(op, no_attrs(), std::move(inputs), type);
  }

  ir::Value* emit(const OpDef& op, const Attrs& attrs, std::vector<ir::Value*> inputs,
                  const ir::Type& type) {
    std::unique_ptr<ir::Node> node = g_.make_node(op, attrs, std::move(inputs), {type});
    node->module_path = origin_->module_path;
    node->loc = origin_->loc;
    ir::Value* out = node->outputs[0];
    created_.insert(node.get());
    g_.mutable_nodes().push_back(std::move(node));
    return out;
  }

  // A rank-0 `dtype` value holding `value` rounded to `dtype`, made once per graph.
  ir::Value* constant(DType dtype, double value) {
    auto key = std::make_pair(dtype, dtype == DType::Float32 ? static_cast<float>(value) : value);
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    ir::Type type{dtype, Shape{}, kCPU};
    ir::Value* v;
    if (!g_.parent()) {
      v = g_.add_input(ir::InputKind::Constant, fresh_name(), type, Tensor::scalar(value, dtype));
      added_inputs_.insert(v);
    } else {
      ops::FullAttrs attrs;
      attrs.value = value;
      attrs.dtype = dtype;
      attrs.device = kCPU;
      v = emit(ops::full, attrs, {}, type);
    }
    constants_[key] = v;
    return v;
  }

  std::string fresh_name() {
    while (true) {
      std::string name = "decompose_" + std::to_string(next_name_++);
      bool taken = false;
      for (const ir::GraphInput& in : g_.inputs()) taken = taken || in.name == name;
      if (!taken) return name;
    }
  }

  // Drops the nodes this rewrite made that nothing needs, then the constants nothing reads.
  void remove_unread() {
    std::unordered_set<const ir::Node*> live = live_nodes(g_);
    g_.erase_nodes_if([&](const ir::Node& n) {
      bool dead = created_.count(&n) && !live.count(&n);
      if (dead) created_.erase(&n);
      return dead;
    });
    std::unordered_set<const ir::Value*> read;
    for (const auto& node : g_.nodes()) read.insert(node->inputs.begin(), node->inputs.end());
    for (const ir::GraphOutput& o : g_.outputs()) read.insert(o.value);
    std::erase_if(g_.mutable_inputs(), [&](const ir::GraphInput& in) {
      return added_inputs_.count(in.value) && !read.count(in.value);
    });
  }

  ir::Graph& g_;
  const ir::Node* origin_ = nullptr;  // the node being expanded
  std::vector<std::pair<const ir::Value*, ir::Value*>> replaced_;
  std::unordered_set<const ir::Node*> created_;
  const FusionRules& rules_;
  std::unordered_map<const ir::Value*, std::vector<const ir::Node*>> readers_;
  std::map<std::pair<DType, double>, ir::Value*> constants_;
  std::unordered_set<const ir::Value*> added_inputs_;
  int next_name_ = 0;
};

class Decompose : public Pass {
 public:
  explicit Decompose(const PassOptions& options) { options.check_known("decompose", {}); }
  std::string_view name() const override { return "decompose"; }
  std::string summary() const override { return summary_; }

  bool run(ir::Graph& g, const PassContext& context) override {
    int decomposed = 0, made = 0;
    summary_ = "no backend's fusion rules: nothing decomposed";
    if (!context.fusion) return false;
    decompose_graph(g, *context.fusion, decomposed, made);
    summary_ = std::to_string(decomposed) + (decomposed == 1 ? " op" : " ops") + " into " +
               std::to_string(made);
    return decomposed > 0;
  }

 private:
  static void decompose_graph(ir::Graph& g, const FusionRules& rules, int& decomposed,
                              int& made) {
    for (const auto& node : g.nodes())
      if (node->op != &ops::fused)  // a group's region is already one kernel
        for (const auto& region : node->regions)
          decompose_graph(*region, rules, decomposed, made);
    decomposed += GraphDecompose(g, rules).run(made);
  }

  std::string summary_;
};

}  // namespace

std::unique_ptr<Pass> create_decompose_pass(const PassOptions& options) {
  return std::make_unique<Decompose>(options);
}

}  // namespace kiln::passes
