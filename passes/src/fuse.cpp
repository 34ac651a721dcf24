// fuse: groups elementwise ops, and reductions over the last dim together with the
// elementwise ops around them, into `fused` nodes, each of which a backend runs as one
// kernel (one pass over memory instead of one per op).
//
// Algorithm:
//   1. A node is fusible when its op is Elementwise with a scalar_body, or a float
//      sum/amax/amin over exactly the last dim with keepdim (a "row reduction": softmax and
//      layer_norm decompose into them), and the backend's FusionRules (PassContext::fusion)
//      accept the op with every dtype and device of its operands and results. Without rules
//      nothing is fused.
//   2. Each group has an iteration shape S and is "row" when it holds a row reduction of an
//      input of shape S. Walk the nodes in order. A fusible node joins the group of a fusible
//      producer when their iteration shapes match, or when one is a row group over S and the
//      other iterates over S's row shape (S with the last dim 1: per-row values such as a
//      mean or 1/sqrt(var + eps)). It then pulls in its other producers' groups the same way.
//      A merge is refused when it would exceed the limits (max-ops, max-inputs) or create a
//      cycle: a path from one part to the other through a node outside both.
//   3. Each group becomes one `fused` node of kind "elementwise" or "row" whose region holds
//      copies of its ops; values used outside the group (or returned) are its results. The
//      nodes are then put back in a dependency order that keeps the original order where it
//      can.
// Single elementwise ops become groups too, so every elementwise op runs as generated code.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "kiln/error.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/reduction.h"
#include "kiln/passes/pass.h"
#include "pass_factories.h"

namespace kiln::passes {
namespace {

// Whether the backend accepts `n` with each of its operands and results.
bool accepted(const FusionRules& rules, const ir::Node& n) {
  for (const auto* values : {&n.inputs, &n.outputs})
    for (const ir::Value* v : *values)
      if (!v || !rules.can_fuse(*n.op, v->type.dtype, v->type.device)) return false;
  return true;
}

bool fusible(const FusionRules& rules, const ir::Node& n) {
  if (n.op->lowering != LoweringClass::Elementwise || !n.op->scalar_body || !n.regions.empty())
    return false;
  return n.outputs.size() == 1 && accepted(rules, n);
}

// A float sum, amax or amin over exactly the last dim, keeping it (the decompose pass makes
// these from softmax, log_softmax and layer_norm).
bool row_reduction(const FusionRules& rules, const ir::Node& n) {
  if (n.op != &ops::sum && n.op != &ops::amax && n.op != &ops::amin) return false;
  if (n.inputs.size() != 1 || !n.inputs[0] || n.outputs.size() != 1) return false;
  const ir::Type& in = n.inputs[0]->type;
  const ir::Type& out = n.outputs[0]->type;
  if (!is_floating(in.dtype) || out.dtype != in.dtype || in.shape.empty()) return false;
  if (!accepted(rules, n)) return false;
  const auto& a = static_cast<const ops::ReduceAttrs&>(*n.attrs);
  const auto rank = static_cast<int64_t>(in.shape.size());
  if (!a.keepdim || a.dims.size() != 1) return false;
  int64_t d = a.dims[0] < 0 ? a.dims[0] + rank : a.dims[0];
  return d == rank - 1;
}

// `shape` with its last dim 1: where a row reduction over `shape` puts one value per row.
Shape row_shape(Shape shape) {
  shape.back() = 1;
  return shape;
}

// What a group iterates over: `iteration` (the common result shape, or for a row group the
// shape its reductions read), and whether it holds a row reduction.
struct GroupShape {
  Shape iteration;
  bool row = false;
};

// The shape of a group made of groups a and b, or nothing when they cannot be one kernel.
std::optional<GroupShape> merged_shape(const GroupShape& a, const GroupShape& b) {
  if (a.iteration == b.iteration) return GroupShape{a.iteration, a.row || b.row};
  // A row group takes ops over its row shape, but not reductions of their own: each of its
  // reductions loops over the last dim of its iteration shape.
  if (a.row && !b.row && b.iteration == row_shape(a.iteration)) return a;
  if (b.row && !a.row && a.iteration == row_shape(b.iteration)) return b;
  return std::nullopt;
}

class Fuse : public Pass {
 public:
  explicit Fuse(const PassOptions& options) {
    options.check_known("fuse", {"max-ops", "max-inputs"});
    max_ops_ = options.get_int("fuse", "max-ops", 64);
    max_inputs_ = options.get_int("fuse", "max-inputs", 16);
    KILN_CHECK(max_ops_ >= 1 && max_inputs_ >= 1,
               "[fuse] expected max-ops and max-inputs of at least 1, found max-ops=", max_ops_,
               ", max-inputs=", max_inputs_, ". Fix: pass positive limits.");
  }
  std::string_view name() const override { return "fuse"; }
  std::string summary() const override { return summary_; }

  bool run(ir::Graph& g, const PassContext& context) override {
    groups_made_ = ops_fused_ = 0;
    summary_ = "no backend's fusion rules: nothing fused";
    if (!context.fusion) return false;
    bool changed = fuse_graph(g, *context.fusion);
    summary_ = std::to_string(ops_fused_) + " ops in " + std::to_string(groups_made_) + " groups";
    return changed;
  }

 private:
  bool fuse_graph(ir::Graph& g, const FusionRules& rules) {
    bool changed = false;
    for (const auto& node : g.nodes())
      if (node->op != &ops::fused)  // a group's region is already one kernel
        for (const auto& region : node->regions) changed |= fuse_graph(*region, rules);
    GraphGroups groups(g, rules, max_ops_, max_inputs_);
    groups.form();
    if (!groups.any()) return changed;
    groups.rewrite(groups_made_, ops_fused_);
    return true;
  }

  // The grouping of one graph's nodes and its rewrite into fused nodes.
  class GraphGroups {
   public:
    GraphGroups(ir::Graph& g, const FusionRules& rules, int64_t max_ops, int64_t max_inputs)
        : g_(g), rules_(rules), max_ops_(max_ops), max_inputs_(max_inputs) {
      const auto& nodes = g.nodes();
      group_.assign(nodes.size(), -1);
      for (size_t i = 0; i < nodes.size(); ++i) {
        index_[nodes[i].get()] = i;
        for (const ir::Value* v : nodes[i]->inputs)
          if (v && v->producer) users_[v->producer].push_back(i);
      }
    }

    void form() {
      const auto& nodes = g_.nodes();
      for (size_t i = 0; i < nodes.size(); ++i) {
        const ir::Node& n = *nodes[i];
        const bool row = row_reduction(rules_, n);
        if (!row && !fusible(rules_, n)) continue;
        group_[i] = static_cast<int>(members_.size());
        members_.push_back({i});
        shapes_.push_back({(row ? n.inputs[0] : n.outputs[0])->type.shape, row});
        for (const ir::Value* v : n.inputs) {
          const ir::Node* p = v->producer;
          if (!p || !index_.count(p)) continue;
          int pg = group_[index_.at(p)];
          if (pg < 0 || pg == group_[i]) continue;
          try_merge(group_[i], pg);
        }
      }
    }

    bool any() const {
      return std::any_of(members_.begin(), members_.end(),
                         [](const auto& m) { return !m.empty(); });
    }

    void rewrite(int& groups_made, int& ops_fused) {
      auto& nodes = g_.mutable_nodes();
      std::unordered_map<const ir::Value*, ir::Value*> renamed;  // group result -> fused output
      std::vector<std::unique_ptr<ir::Node>> fused_nodes(members_.size());
      for (size_t k = 0; k < members_.size(); ++k) {
        if (members_[k].empty()) continue;
        fused_nodes[k] = build_fused(k, renamed);
        ++groups_made;
        ops_fused += static_cast<int>(members_[k].size());
      }
      // Units in dependency order: a plain node, or a group at its first member's place.
      std::vector<int> unit_of(nodes.size());
      std::vector<ir::Node*> units;  // by first position
      std::map<size_t, size_t> first_position_unit;
      for (size_t i = 0; i < nodes.size(); ++i) {
        int k = group_[i];
        if (k >= 0 && members_[k].front() != i) continue;
        first_position_unit[i] = units.size();
        units.push_back(k >= 0 ? fused_nodes[k].get() : nodes[i].get());
      }
      for (size_t i = 0; i < nodes.size(); ++i) {
        int k = group_[i];
        unit_of[i] = static_cast<int>(first_position_unit.at(k >= 0 ? members_[k].front() : i));
      }
      // Readers of a group's results (plain nodes, other groups) now read the fused node's.
      auto rename_inputs = [&](ir::Node& node) {
        for (ir::Value*& v : node.inputs)
          if (v && renamed.count(v)) v = renamed.at(v);
      };
      for (const auto& node : nodes)
        if (group_[index_.at(node.get())] < 0) rename_inputs(*node);
      for (const auto& node : fused_nodes)
        if (node) rename_inputs(*node);
      for (ir::GraphOutput& o : g_.mutable_outputs())
        if (renamed.count(o.value)) o.value = renamed.at(o.value);
      // Kahn's algorithm, always taking the ready unit that came first originally.
      std::vector<std::set<size_t>> deps(units.size());
      std::vector<std::vector<size_t>> dependents(units.size());
      for (size_t u = 0; u < units.size(); ++u)
        for (const ir::Value* v : units[u]->inputs) {
          if (!v || !v->producer) continue;
          size_t from = producer_unit(v, unit_of, fused_nodes);
          if (from != u && deps[u].insert(from).second) dependents[from].push_back(u);
        }
      std::set<size_t> ready;
      for (size_t u = 0; u < units.size(); ++u)
        if (deps[u].empty()) ready.insert(u);
      std::vector<std::unique_ptr<ir::Node>> owned(units.size());
      for (size_t i = 0; i < nodes.size(); ++i)
        if (group_[i] < 0) owned[unit_of[i]] = std::move(nodes[i]);
      for (size_t k = 0; k < members_.size(); ++k)
        if (fused_nodes[k]) owned[unit_of[members_[k].front()]] = std::move(fused_nodes[k]);
      std::vector<std::unique_ptr<ir::Node>> order;
      while (!ready.empty()) {
        size_t u = *ready.begin();
        ready.erase(ready.begin());
        order.push_back(std::move(owned[u]));
        for (size_t d : dependents[u])
          if (deps[d].erase(u) && deps[d].empty()) ready.insert(d);
      }
      KILN_CHECK(order.size() == units.size(), "[fuse] internal error: the fused graph of ",
                 g_.name(), " has a cycle (", units.size() - order.size(),
                 " nodes unordered). Fix: report this graph (KILN_LOG=graphs).");
      nodes = std::move(order);
    }

   private:
    // The unit (index into units) whose node defines `v` after the rewrite.
    size_t producer_unit(const ir::Value* v, const std::vector<int>& unit_of,
                         const std::vector<std::unique_ptr<ir::Node>>& fused_nodes) const {
      for (size_t k = 0; k < fused_nodes.size(); ++k)
        if (fused_nodes[k].get() == v->producer) return unit_of[members_[k].front()];
      return unit_of[index_.at(v->producer)];
    }

    // Values the group reads from outside it, in first-use order.
    std::vector<ir::Value*> external_inputs(const std::vector<size_t>& members) const {
      std::vector<ir::Value*> out;
      std::unordered_set<const ir::Node*> inside;
      for (size_t i : members) inside.insert(g_.nodes()[i].get());
      for (size_t i : members)
        for (ir::Value* v : g_.nodes()[i]->inputs)
          if (!(v->producer && inside.count(v->producer)) &&
              std::find(out.begin(), out.end(), v) == out.end())
            out.push_back(v);
      return out;
    }

    void try_merge(int a, int b) {
      std::optional<GroupShape> shape = merged_shape(shapes_[a], shapes_[b]);
      if (!shape) return;
      std::vector<size_t> all = members_[a];
      all.insert(all.end(), members_[b].begin(), members_[b].end());
      if (static_cast<int64_t>(all.size()) > max_ops_) return;
      if (static_cast<int64_t>(external_inputs(all).size()) > max_inputs_) return;
      if (path_outside(a, b) || path_outside(b, a)) return;
      for (size_t i : members_[b]) group_[i] = a;
      std::sort(all.begin(), all.end());
      members_[a] = std::move(all);
      members_[b].clear();
      shapes_[a] = std::move(*shape);
    }

    // Whether some use chain leaves group `from`, passes through a node outside both groups
    // and reaches group `to` (merging them would then need that node inside and outside).
    bool path_outside(int from, int to) const {
      std::vector<size_t> stack;
      std::vector<bool> seen(group_.size(), false);
      for (size_t i : members_[from])
        for (size_t u : users_of(i))
          if (group_[u] != from && group_[u] != to && !seen[u]) {
            seen[u] = true;
            stack.push_back(u);
          }
      while (!stack.empty()) {
        size_t i = stack.back();
        stack.pop_back();
        for (size_t u : users_of(i)) {
          if (group_[u] == to) return true;
          if (!seen[u] && group_[u] != from) {
            seen[u] = true;
            stack.push_back(u);
          }
        }
      }
      return false;
    }

    const std::vector<size_t>& users_of(size_t i) const {
      static const std::vector<size_t> none;
      auto it = users_.find(g_.nodes()[i].get());
      return it == users_.end() ? none : it->second;
    }

    std::unique_ptr<ir::Node> build_fused(
        size_t k, std::unordered_map<const ir::Value*, ir::Value*>& renamed) {
      const std::vector<size_t>& members = members_[k];
      std::vector<ir::Value*> inputs = external_inputs(members);
      std::unordered_set<const ir::Node*> inside;
      for (size_t i : members) inside.insert(g_.nodes()[i].get());
      // Results: member outputs used outside the group or returned by the graph.
      std::vector<ir::Value*> results;
      auto used_outside = [&](const ir::Value* v) {
        for (size_t u : users_of(index_.at(v->producer)))
          if (!inside.count(g_.nodes()[u].get())) return true;
        for (const ir::GraphOutput& o : g_.outputs())
          if (o.value == v) return true;
        return false;
      };
      for (size_t i : members)
        for (ir::Value* v : g_.nodes()[i]->outputs)
          if (used_outside(v)) results.push_back(v);
      std::vector<ir::Type> result_types;
      for (const ir::Value* v : results) result_types.push_back(v->type);
      const ir::Node& last = *g_.nodes()[members.back()];
      ops::FusedAttrs attrs;
      if (shapes_[k].row) attrs.kind = "row";
      std::unique_ptr<ir::Node> node = g_.make_node(ops::fused, attrs, inputs, result_types);
      node->module_path = last.module_path;
      node->loc = last.loc;
      ir::Graph* region = g_.add_region(node.get());
      std::unordered_map<const ir::Value*, ir::Value*> inner;
      for (ir::Value* v : inputs) inner[v] = region->add_input(ir::InputKind::Input, "", v->type);
      for (size_t i : members) {
        const ir::Node& n = *g_.nodes()[i];
        std::vector<ir::Value*> args;
        for (const ir::Value* v : n.inputs) args.push_back(inner.at(v));
        std::vector<ir::Type> types;
        for (const ir::Value* v : n.outputs) types.push_back(v->type);
        ir::Node* copy = region->add_node(*n.op, *n.attrs, std::move(args), types);
        copy->module_path = n.module_path;
        copy->loc = n.loc;
        for (size_t j = 0; j < n.outputs.size(); ++j) inner[n.outputs[j]] = copy->outputs[j];
      }
      for (size_t j = 0; j < results.size(); ++j) {
        region->add_output(inner.at(results[j]));
        renamed[results[j]] = node->outputs[j];
      }
      return node;
    }

    ir::Graph& g_;
    const FusionRules& rules_;
    int64_t max_ops_, max_inputs_;
    std::unordered_map<const ir::Node*, size_t> index_;
    std::unordered_map<const ir::Node*, std::vector<size_t>> users_;
    std::vector<int> group_;                    // node index -> group, -1 when not fused
    std::vector<std::vector<size_t>> members_;  // group -> node indices, ascending
    std::vector<GroupShape> shapes_;            // group -> what it iterates over
  };

  int64_t max_ops_ = 64, max_inputs_ = 16;
  int groups_made_ = 0, ops_fused_ = 0;
  std::string summary_;
};

}  // namespace

std::unique_ptr<Pass> create_fuse_pass(const PassOptions& options) {
  return std::make_unique<Fuse>(options);
}

}  // namespace kiln::passes
