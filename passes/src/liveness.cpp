// Liveness: a backward walk from the graph's outputs and its effectful nodes.
#include "liveness.h"

namespace kiln::passes {

bool has_effect(const ir::Node& n) {
  if (n.op->side_effects || n.op->random || n.op->lowering == LoweringClass::Random) return true;
  for (const auto& region : n.regions)
    for (const auto& inner : region->nodes())
      if (has_effect(*inner)) return true;
  return false;
}

std::unordered_set<const ir::Node*> live_nodes(const ir::Graph& g) {
  std::unordered_set<const ir::Value*> needed;
  for (const ir::GraphOutput& o : g.outputs()) needed.insert(o.value);
  std::unordered_set<const ir::Node*> live;
  const auto& nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node& n = **it;
    bool used = has_effect(n);
    for (const ir::Value* v : n.outputs) used = used || needed.count(v);
    if (!used) continue;
    live.insert(&n);
    for (const ir::Value* v : n.inputs)
      if (v) needed.insert(v);
  }
  return live;
}

}  // namespace kiln::passes
