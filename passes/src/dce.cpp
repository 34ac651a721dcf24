// dce: removes nodes whose results are never used, in the graph and inside every region.
//
// Algorithm: walk each graph's nodes backwards with the set of needed values, seeded with
// the graph's outputs (liveness.h). A node is live when one of its results is needed or it
// has an effect that must happen on every run: OpDef::side_effects (debug_print prints), a
// random op (skipping an unused dropout would skip its generator draw and shift every later
// draw against eager) or a region holding such a node. A live node's inputs are needed and
// its regions are cleaned the same way (their yields are their roots); the other nodes are
// erased. Graph and region inputs always stay: they are the executor's calling convention.
#include "kiln/passes/pass.h"
#include "liveness.h"
#include "pass_factories.h"

namespace kiln::passes {
namespace {

class Dce : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string summary() const override {
    return "removed " + std::to_string(removed_) + (removed_ == 1 ? " node" : " nodes");
  }

  bool run(ir::Graph& g, const PassContext&) override {
    removed_ = 0;
    clean(g);
    return removed_ > 0;
  }

 private:
  void clean(ir::Graph& g) {
    std::unordered_set<const ir::Node*> live = live_nodes(g);
    for (const auto& node : g.nodes()) {
      if (live.count(node.get())) {
        for (const auto& region : node->regions) clean(*region);
      } else {
        removed_ += node->regions.empty() ? 1 : 1 + count_region_nodes(*node);
      }
    }
    g.erase_nodes_if([&](const ir::Node& n) { return !live.count(&n); });
  }

  static size_t count_region_nodes(const ir::Node& n) {
    size_t count = 0;
    for (const auto& region : n.regions) count += region->node_count();
    return count;
  }

  size_t removed_ = 0;
};

}  // namespace

std::unique_ptr<Pass> create_dce_pass(const PassOptions& options) {
  options.check_known("dce", {});
  return std::make_unique<Dce>();
}

}  // namespace kiln::passes
