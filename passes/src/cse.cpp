// cse: merges nodes that compute the same thing, in the graph and inside each region.
//
// Algorithm: walk each graph's nodes in order, keeping a table keyed by (op, attribute
// hash, input values). A node whose op, attributes (Attrs::equals), inputs and result types
// equal an earlier node's is a duplicate: its results' uses move to the earlier node's
// results and it is erased. Walking in order makes chains of duplicates collapse in one
// run, since the uses of a merged node already read the survivor when its users are
// visited. Random ops (each call draws anew), side-effect ops (each call prints) and nodes
// with regions are never merged. Each region is its own scope: regions are isolated, so
// a node inside never equals one outside.
#include <unordered_map>
#include <unordered_set>

#include "kiln/passes/pass.h"
#include "pass_factories.h"

namespace kiln::passes {
namespace {

bool mergeable(const ir::Node& n) {
  return !n.op->side_effects && !n.op->random && n.op->lowering != LoweringClass::Random &&
         n.regions.empty();
}

size_t node_key(const ir::Node& n) {
  size_t seed = std::hash<const void*>()(n.op);
  detail::hash_combine(seed, n.attrs->hash());
  for (const ir::Value* v : n.inputs) detail::hash_combine(seed, std::hash<const void*>()(v));
  return seed;
}

bool same_computation(const ir::Node& a, const ir::Node& b) {
  if (a.op != b.op || a.inputs != b.inputs || a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (!(a.outputs[i]->type == b.outputs[i]->type)) return false;
  return a.attrs->equals(*b.attrs);
}

class Cse : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  std::string summary() const override {
    return "merged " + std::to_string(merged_) + (merged_ == 1 ? " node" : " nodes");
  }

  bool run(ir::Graph& g, const PassContext&) override {
    merged_ = 0;
    merge(g);
    return merged_ > 0;
  }

 private:
  void merge(ir::Graph& g) {
    std::unordered_multimap<size_t, const ir::Node*> seen;
    std::unordered_set<const ir::Node*> duplicates;
    for (const auto& node : g.nodes()) {
      for (const auto& region : node->regions) merge(*region);
      if (!mergeable(*node)) continue;
      size_t key = node_key(*node);
      const ir::Node* survivor = nullptr;
      auto [begin, end] = seen.equal_range(key);
      for (auto it = begin; it != end && !survivor; ++it)
        if (same_computation(*it->second, *node)) survivor = it->second;
      if (!survivor) {
        seen.emplace(key, node.get());
        continue;
      }
      for (size_t i = 0; i < node->outputs.size(); ++i)
        g.replace_uses(node->outputs[i], survivor->outputs[i]);
      duplicates.insert(node.get());
    }
    merged_ += duplicates.size();
    if (!duplicates.empty())
      g.erase_nodes_if([&](const ir::Node& n) { return duplicates.count(&n) > 0; });
  }

  size_t merged_ = 0;
};

}  // namespace

std::unique_ptr<Pass> create_cse_pass(const PassOptions& options) {
  options.check_known("cse", {});
  return std::make_unique<Cse>();
}

}  // namespace kiln::passes
