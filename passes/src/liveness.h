// Which nodes of a graph matter: dce removes the others, canonicalize ignores their uses.
#pragma once

#include <unordered_set>

#include "kiln/ir/graph.h"

namespace kiln::passes {

// Whether running `n` matters beyond its results: OpDef::side_effects (debug_print prints),
// a random op (skipping an unused dropout would skip its generator draw and shift every
// later draw against eager), or a region holding such a node.
bool has_effect(const ir::Node& n);

// The nodes of `g` (not of its regions) whose results the graph's outputs need, directly
// or through other nodes, plus the nodes with an effect and what they read.
std::unordered_set<const ir::Node*> live_nodes(const ir::Graph& g);

}  // namespace kiln::passes
