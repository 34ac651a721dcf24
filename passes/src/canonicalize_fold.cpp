// Constant folding for canonicalize.
//
// Algorithm: (1) evaluate, in node order, every node that is neither random nor
// side-effecting nor region-owning, whose inputs all have known values (constants or
// results evaluated before it), whose results are static-shaped CPU tensors of at most
// max_elements elements in total: eager dispatch, with grad mode off and no tracer
// listening. The evaluated values keep eager's layout (a permute of a constant is a strided
// view of it), so chains of views evaluate exactly as eager would. (2) Each evaluated value
// read by a node that was not evaluated becomes a new Constant graph input holding a
// contiguous copy, and those reads move to it. The evaluated nodes are left for dce.
//
// Not folded, on purpose: values only returned by the graph (the executor hands constants
// out by reference, so a caller's in-place write to a result would change the graph), results
// of nodes without inputs (a fill costs less than a stored constant), and strided views read
// by a view op or a region (view and as_strided read the layout; a constant is contiguous).
#include "canonicalize_fold.h"

#include <unordered_map>
#include <unordered_set>

#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/view.h"

namespace kiln::passes {
namespace {

// Eager evaluation at compile time must not record autograd nodes nor reach a tracer that
// happens to be active on this thread.
class PlainEagerScope {
 public:
  PlainEagerScope() : grad_(grad_mode_enabled()), interceptor_(set_interceptor(nullptr)) {
    set_grad_mode(false);
  }
  ~PlainEagerScope() {
    set_grad_mode(grad_);
    set_interceptor(interceptor_);
  }
  PlainEagerScope(const PlainEagerScope&) = delete;
  PlainEagerScope& operator=(const PlainEagerScope&) = delete;

 private:
  bool grad_;
  DispatchInterceptor* interceptor_;
};

bool has_symbolic_attrs(const Attrs& attrs) {
  bool symbolic = false;
  attrs.clone()->map_ints([&](int64_t v) {
    symbolic = symbolic || ir::is_symbolic_size(v);
    return v;
  });
  return symbolic;
}

bool evaluable(const ir::Node& n, int64_t max_elements) {
  const OpDef& op = *n.op;
  if (op.random || op.side_effects || op.lowering == LoweringClass::Random || !n.regions.empty())
    return false;
  int64_t elements = 0;
  for (const ir::Value* v : n.outputs) {
    if (!v->type.device.is_cpu()) return false;
    for (int64_t d : v->type.shape)
      if (ir::is_symbolic_size(d)) return false;
    elements += numel(v->type.shape);
    if (elements > max_elements) return false;
  }
  return !has_symbolic_attrs(*n.attrs);
}

bool dense(const Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0;
}

std::string fresh_name(const ir::Graph& g, int& next_name) {
  while (true) {
    std::string name = "folded_" + std::to_string(next_name++);
    bool taken = false;
    for (const ir::GraphInput& in : g.inputs()) taken = taken || in.name == name;
    if (!taken) return name;
  }
}

}  // namespace

const Tensor* constant_data(const ir::Graph& g, const ir::Value* v, bool parameters_frozen) {
  if (g.parent() || !v || v->producer) return nullptr;
  for (const ir::GraphInput& in : g.inputs()) {
    if (in.value != v) continue;
    bool constant = in.kind == ir::InputKind::Constant ||
                    (parameters_frozen && (in.kind == ir::InputKind::Parameter ||
                                           in.kind == ir::InputKind::Buffer));
    return constant && in.constant.defined() ? &in.constant : nullptr;
  }
  return nullptr;
}

size_t fold_constants(ir::Graph& g, const FoldOptions& options, int& next_name) {
  PlainEagerScope scope;
  std::unordered_map<const ir::Value*, Tensor> known;
  for (const ir::GraphInput& in : g.inputs())
    if (const Tensor* t = constant_data(g, in.value, options.parameters_frozen))
      known[in.value] = *t;

  std::unordered_set<const ir::Node*> evaluated;
  for (const auto& node : g.nodes()) {
    if (!evaluable(*node, options.max_elements)) continue;
    std::vector<Tensor> args;
    bool ready = true;
    for (const ir::Value* v : node->inputs) {
      auto it = v ? known.find(v) : known.end();
      ready = ready && (!v || it != known.end());
      args.push_back(v && ready ? it->second : Tensor());
    }
    if (!ready) continue;
    Tensors out;
    try {
      out = dispatch(*node->op, TensorSpan(args.data(), args.size()), *node->attrs);
    } catch (const Error&) {
      continue;  // no CPU kernel, or an error the compiled graph must raise when it runs
    }
    bool matches = out.size() == node->outputs.size();
    for (size_t k = 0; matches && k < out.size(); ++k)
      matches = out[k].defined() && ir::Type::of(out[k]) == node->outputs[k]->type;
    if (!matches) continue;
    for (size_t k = 0; k < out.size(); ++k) known[node->outputs[k]] = out[k];
    evaluated.insert(node.get());
  }
  if (evaluated.empty()) return 0;

  // The evaluated values that unevaluated nodes read, in the order they are defined (so
  // the folded constants are numbered in graph order).
  auto is_evaluated = [&](const ir::Value* v) {
    return v && v->producer && evaluated.count(v->producer) > 0;
  };
  std::unordered_set<const ir::Value*> read_by_view;
  std::unordered_set<const ir::Value*> frontier;
  for (const auto& node : g.nodes()) {
    if (evaluated.count(node.get())) continue;
    for (const ir::Value* v : node->inputs) {
      if (!is_evaluated(v)) continue;
      frontier.insert(v);
      // A region may yield its operand unchanged to a view further on.
      if (node->op->lowering == LoweringClass::View || !node->regions.empty())
        read_by_view.insert(v);
    }
  }

  size_t replaced = 0;
  for (const auto& node : g.nodes()) {
    if (!evaluated.count(node.get()) || node->inputs.empty()) continue;
    for (ir::Value* v : node->outputs) {
      if (!frontier.count(v)) continue;
      Tensor t = known.at(v);
      if (!dense(t) && read_by_view.count(v)) continue;
      if (!dense(t) || node->op->kernel_makes_outputs) {
        try {
          t = dispatch1(ops::clone, {&t, 1});
        } catch (const Error&) {
          continue;
        }
      }
      ir::Value* c = g.add_input(ir::InputKind::Constant, fresh_name(g, next_name), v->type, t);
      for (const auto& user : g.nodes())
        if (!evaluated.count(user.get()))
          for (ir::Value*& in : user->inputs)
            if (in == v) in = c;
      ++replaced;
    }
  }
  return replaced;
}

}  // namespace kiln::passes
