// specialize: binds symbolic sizes to numbers, making a dynamic graph a static one
// (`specialize{s0=64}` compiles a graph traced with a dynamic batch for batch 64 only).
//
// Shapes propagate while tracing: every op's infer runs on sizes in which symbol sk is a
// sentinel prime and a product of symbols is the product of their sentinels
// (kiln/ir/symbols.h), and ir::verify re-runs infer on every node after each pass. So a
// type's symbolic sizes are exactly products of symbols, and binding a symbol is a
// substitution: every type (graph and region inputs, every node's results) and every
// integer attribute holding a size (a view's shape) gets sk replaced by its size, in the
// graph and in every region. Unbound symbols stay. The pass then re-runs infer on each node
// outside regions as a check: a disagreement means the graph was not traced by kiln's
// rules and is reported, naming the node.
#include <array>
#include <functional>
#include <string>

#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/passes/pass.h"
#include "pass_factories.h"

namespace kiln::passes {
namespace {

// The sizes bound to each symbol; -1 where unbound.
using Bindings = std::array<int64_t, ir::kMaxSymbols>;

// v with every bound symbol replaced by its size (a plain number stays as it is).
int64_t bind(int64_t v, const Bindings& sizes) {
  std::optional<ir::SymbolicSize> s = ir::decode_size(v);
  if (!s) return v;
  int64_t out = s->coeff;
  for (int k = 0; k < ir::kMaxSymbols; ++k)
    for (int e = 0; e < s->exponents[static_cast<size_t>(k)]; ++e)
      out *=
          sizes[static_cast<size_t>(k)] >= 0 ? sizes[static_cast<size_t>(k)] : ir::symbol_value(k);
  return out;
}

class Specialize : public Pass {
 public:
  explicit Specialize(const PassOptions& options) {
    std::vector<std::string> names;
    for (int k = 0; k < ir::kMaxSymbols; ++k) names.push_back("s" + std::to_string(k));
    std::vector<std::string_view> known(names.begin(), names.end());
    known.push_back("allow_one");
    options.check_known("specialize", known);
    // allow_one=1 binds size 1 too. The result may differ from a trace at size 1 (which
    // broadcasts); export compares the two to learn whether a dynamic graph serves size 1.
    const bool allow_one = options.get_int("specialize", "allow_one", 0) != 0;
    sizes_.fill(-1);
    for (int k = 0; k < ir::kMaxSymbols; ++k) {
      int64_t size = options.get_int("specialize", names[static_cast<size_t>(k)], -1);
      if (size == -1) continue;
      KILN_CHECK(size >= 2 || (allow_one && size == 1),
                 "[specialize] expected a size of at least 2 for ", names[k], ", found ", size,
                 ". Fix: symbolic dims stand for sizes >= 2 (sizes 0 and 1 broadcast and "
                 "squeeze differently); trace with that size as a static dim instead (or "
                 "add allow_one=1 to compare with such a trace).");
      sizes_[static_cast<size_t>(k)] = size;
      bound_ += (bound_.empty() ? "" : ",") + names[k] + "=" + std::to_string(size);
    }
  }
  std::string_view name() const override { return "specialize"; }
  std::string summary() const override {
    return (bound_.empty() ? std::string("nothing bound") : bound_) + ": " +
           std::to_string(changed_) + " types and attributes";
  }

  bool run(ir::Graph& g, const PassContext&) override {
    changed_ = 0;
    if (bound_.empty()) return false;
    substitute(g);
    check_types(g);
    return changed_ > 0;
  }

 private:
  void substitute_type(ir::Value* v) {
    Shape before = v->type.shape;
    for (int64_t& size : v->type.shape) size = bind(size, sizes_);
    changed_ += before != v->type.shape;
  }

  void substitute(ir::Graph& g) {
    for (const ir::GraphInput& in : g.inputs()) substitute_type(in.value);
    for (auto& node : g.mutable_nodes()) {
      for (ir::Value* v : node->outputs) substitute_type(v);
      bool attrs_changed = false;
      node->attrs->map_ints([&](int64_t v) {
        int64_t bound = bind(v, sizes_);
        attrs_changed |= bound != v;
        return bound;
      });
      changed_ += attrs_changed;
      for (const auto& region : node->regions) substitute(*region);
    }
  }

  // Re-runs infer on the graph's region-free nodes: the substituted types must be what the
  // ops infer from the substituted inputs.
  static void check_types(const ir::Graph& g) {
    for (const auto& node : g.nodes()) {
      if (!node->regions.empty()) continue;  // ir::verify checks region signatures
      SmallVector<Tensor, 4> inputs;
      for (const ir::Value* v : node->inputs) inputs.push_back(ir::placeholder(v));
      TensorTypes inferred;
      try {
        inferred = infer_types(*node->op, TensorSpan(inputs.data(), inputs.size()), *node->attrs);
      } catch (const Error& e) {
        KILN_FAIL("[specialize] ", node->op->name, " %", node->outputs.at(0)->id,
                  " rejects its specialized input types: ", e.what(),
                  " Fix: the graph's symbolic sizes must come from kiln's tracer.");
      }
      for (size_t i = 0; i < inferred.size() && i < node->outputs.size(); ++i)
        KILN_CHECK(ir::Type::of(inferred[i]) == node->outputs[i]->type, "[specialize] ",
                   node->op->name, " %", node->outputs[i]->id, " expected type ",
                   ir::type_str(ir::Type::of(inferred[i])), " from its specialized inputs, found ",
                   ir::type_str(node->outputs[i]->type),
                   ". Fix: the graph's symbolic sizes must come from kiln's tracer (a size "
                   "that is a sum or quotient of symbols is not symbolic there).");
    }
  }

  Bindings sizes_{};
  std::string bound_;  // "s0=64", for the summary
  int changed_ = 0;
};

}  // namespace

std::unique_ptr<Pass> create_specialize_pass(const PassOptions& options) {
  return std::make_unique<Specialize>(options);
}

}  // namespace kiln::passes
