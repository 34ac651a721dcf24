// canonicalize: local simplifications repeated to a fixed point, and constant folding.
//
// Algorithm: repeat (at most max-iterations times) until nothing changes:
//   1. visit every node (regions first, each region on its own) and apply the first rule
//      that matches; a rule either forwards the node's result to an existing value (its
//      uses move there, the node is left for dce) or rewires the node in place:
//        - identities with a constant operand whose elements are all the identity and a
//          result of exactly the other operand's type: x*1, 1*x, x/1, x+0, 0+x, x-0 -> x
//          (for floats the zero must be -0 in x+0 and +0 in x-0: x + (+0) maps -0 to +0);
//        - no-ops: cast to the same dtype, expand to the same shape, permute by the
//          identity, a chain of view/squeeze/unsqueeze that ends at its start's type -> x;
//        - chains: view(view|squeeze|unsqueeze(x)) -> view(x); permute(permute(x)) ->
//          one permute;
//   2. fold constants in the top-level graph (canonicalize_fold.h).
// Results must equal the unrewritten graph's exactly, so a rule whose node made a fresh
// contiguous tensor (x*1, cast) forwards to x only when that cannot be observed: x is a
// fresh result itself, or neither a view op nor a region reads the result (view and
// as_strided read strides and storage offsets, and x may be a strided view) and the graph
// does not return it (a result must not alias an input). Rules between views keep eager's layout
// exactly. Detach is never removed: it stops gradients.
#include <algorithm>
#include <cmath>

#include "canonicalize_fold.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/view.h"
#include "kiln/passes/pass.h"
#include "liveness.h"
#include "pass_factories.h"

namespace kiln::passes {
namespace {

// Whether every element of `c` is `value`; for floating zeros also its sign: x + (-0) and
// x - (+0) give x for every x, but x + (+0) turns -0 into +0 (and 1 / -0 = -inf into +inf).
bool all_identity(const Tensor& c, double value, bool negative_zero) {
  bool floating = is_floating(c.dtype());
  for (double e : c.to_vector<double>()) {
    if (!(e == value)) return false;
    if (floating && value == 0 && std::signbit(e) != negative_zero) return false;
  }
  return true;
}

// The uses of a graph's values that matter: those of live nodes (liveness.h) and the
// graph's outputs. Dead users are ignored, so a no-op whose dead view user still reads it
// goes too. Forwarding only moves uses to values defined earlier, so a node dead at the
// start of a sweep stays dead through it.
class Uses {
 public:
  explicit Uses(const ir::Graph& g) : g_(g), live_(live_nodes(g)) {}

  bool returned(const ir::Value* v) const {
    for (const ir::GraphOutput& o : g_.outputs())
      if (o.value == v) return true;
    return false;
  }
  bool used(const ir::Value* v) const {
    return returned(v) || any_reader(v, [](const ir::Node&) { return true; });
  }
  // Whether a reader may see `v`'s strides: a view op, or a region that may yield its
  // operand unchanged to a view further on.
  bool read_by_view(const ir::Value* v) const {
    return any_reader(v, [](const ir::Node& n) {
      return n.op->lowering == LoweringClass::View || !n.regions.empty();
    });
  }
  // Whether the uses of `v`, a fresh contiguous result, may read `x` instead (see the top).
  bool may_forward_fresh(const ir::Value* v, const ir::Value* x) const {
    const ir::Node* p = x->producer;
    if (p && !p->op->kernel_makes_outputs && p->regions.empty()) return true;
    return !returned(v) && !read_by_view(v);
  }

 private:
  template <class Pred>
  bool any_reader(const ir::Value* v, Pred pred) const {
    for (const auto& n : g_.nodes())
      if (live_.count(n.get()) && pred(*n) &&
          std::find(n->inputs.begin(), n->inputs.end(), v) != n->inputs.end())
        return true;
    return false;
  }

  const ir::Graph& g_;
  std::unordered_set<const ir::Node*> live_;
};

// Ops that keep the row-major order of the elements and only regroup dims: a chain of them
// reads the same addresses as any one view of the chain's start.
bool is_reshape(const ir::Node& n) {
  return n.op == &ops::view || n.op == &ops::squeeze || n.op == &ops::unsqueeze;
}

Shape wrapped_dims(const Shape& dims) {
  Shape out(dims);
  auto rank = static_cast<int64_t>(dims.size());
  for (int64_t& d : out)
    if (d < 0) d += rank;
  return out;
}

bool is_identity_perm(const Shape& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return true;
}

class Canonicalize : public Pass {
 public:
  explicit Canonicalize(const PassOptions& options) {
    options.check_known("canonicalize", {"max-iterations", "fold-max-elements"});
    max_iterations_ = options.get_int("canonicalize", "max-iterations", 16);
    fold_.max_elements = options.get_int("canonicalize", "fold-max-elements", 65536);
    KILN_CHECK(max_iterations_ >= 1 && fold_.max_elements >= 0,
               "[canonicalize] expected max-iterations >= 1 and fold-max-elements >= 0, found ",
               max_iterations_, " and ", fold_.max_elements, ". Fix: pass non-negative limits.");
  }
  std::string_view name() const override { return "canonicalize"; }
  std::string summary() const override {
    auto count = [](size_t n, const char* what) {
      return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
    };
    return count(rewrites_, "rewrite") + ", " + count(folded_, "folded constant");
  }

  bool run(ir::Graph& g, const PassContext& context) override {
    rewrites_ = folded_ = 0;
    fold_.parameters_frozen = context.parameters_frozen;
    int next_name = 0;
    for (int64_t i = 0; i < max_iterations_; ++i) {
      size_t before = rewrites_ + folded_;
      simplify(g);
      folded_ += fold_constants(g, fold_, next_name);
      if (rewrites_ + folded_ == before) break;
    }
    return rewrites_ + folded_ > 0;
  }

 private:
  void simplify(ir::Graph& g) {
    Uses uses(g);
    for (const auto& node : g.nodes()) {
      for (const auto& region : node->regions) simplify(*region);
      ir::Node& n = *node;
      if (n.outputs.size() != 1 || !n.regions.empty()) continue;
      ir::Value* v = n.outputs[0];
      if (ir::Value* to = forward_target(g, uses, n); to && uses.used(v)) {
        g.replace_uses(v, to);
        ++rewrites_;
      } else if (rewire(n)) {
        ++rewrites_;
      }
    }
  }

  // The existing value that `n`'s result equals, or null.
  ir::Value* forward_target(const ir::Graph& g, const Uses& uses, const ir::Node& n) const {
    ir::Value* v = n.outputs[0];
    const OpDef* op = n.op;
    if (op == &ops::mul || op == &ops::add || op == &ops::sub || op == &ops::div) {
      double unit = op == &ops::mul || op == &ops::div ? 1.0 : 0.0;
      bool negative_zero = op == &ops::add;
      bool commutes = op == &ops::mul || op == &ops::add;
      for (size_t k : {size_t{1}, size_t{0}}) {
        if (k == 0 && !commutes) break;
        ir::Value* x = n.inputs[1 - k];
        if (!x) continue;
        const Tensor* c = constant_data(g, n.inputs[k], fold_.parameters_frozen);
        if (c && x->type == v->type && all_identity(*c, unit, negative_zero) &&
            uses.may_forward_fresh(v, x))
          return x;
      }
      return nullptr;
    }
    ir::Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
    if (!x) return nullptr;
    if (op == &ops::cast) return x->type == v->type && uses.may_forward_fresh(v, x) ? x : nullptr;
    if (op == &ops::expand) return x->type == v->type ? x : nullptr;
    if (op == &ops::permute) {
      const auto& a = static_cast<const ops::PermuteAttrs&>(*n.attrs);
      return is_identity_perm(wrapped_dims(a.dims)) ? x : nullptr;
    }
    if (is_reshape(n)) {
      // The closest value up the reshape chain with the result's type.
      for (const ir::Node* p = &n;;) {
        ir::Value* start = p->inputs[0];
        if (start->type == v->type) return start;
        p = start->producer;
        if (!p || !is_reshape(*p)) return nullptr;
      }
    }
    return nullptr;
  }

  // Rewires `n` to read further up a chain; returns whether it did.
  static bool rewire(ir::Node& n) {
    if (n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->producer) return false;
    const ir::Node& p = *n.inputs[0]->producer;
    if (n.op == &ops::view && is_reshape(p)) {
      ir::Value* start = p.inputs[0];
      while (start->producer && is_reshape(*start->producer)) start = start->producer->inputs[0];
      n.inputs[0] = start;
      return true;
    }
    if (n.op == &ops::permute && p.op == &ops::permute) {
      Shape outer = wrapped_dims(static_cast<const ops::PermuteAttrs&>(*n.attrs).dims);
      Shape inner = wrapped_dims(static_cast<const ops::PermuteAttrs&>(*p.attrs).dims);
      Shape composed(outer.size());
      for (size_t i = 0; i < outer.size(); ++i) composed[i] = inner[static_cast<size_t>(outer[i])];
      static_cast<ops::PermuteAttrs&>(*n.attrs).dims = composed;
      n.inputs[0] = p.inputs[0];
      return true;
    }
    return false;
  }

  int64_t max_iterations_ = 16;
  FoldOptions fold_;
  size_t rewrites_ = 0, folded_ = 0;
};

}  // namespace

std::unique_ptr<Pass> create_canonicalize_pass(const PassOptions& options) {
  return std::make_unique<Canonicalize>(options);
}

}  // namespace kiln::passes
