// Constant folding for canonicalize: evaluates nodes whose inputs are all constants with
// eager dispatch and turns the results that the rest of the graph reads into constants.
#pragma once

#include <cstdint>

#include "kiln/ir/graph.h"

namespace kiln::passes {

struct FoldOptions {
  int64_t max_elements = 65536;    // a node whose results hold more is not evaluated
  bool parameters_frozen = false;  // parameters and buffers with data count as constants
};

// The data behind `v` when it is an input of `g` that holds a constant: a Constant input
// with data, or (frozen) a Parameter input with data; else null. Only a top-level graph's
// inputs qualify: a region's inputs are its node's operands, whatever their kind says.
const Tensor* constant_data(const ir::Graph& g, const ir::Value* v, bool parameters_frozen);

// Folds the top-level graph `g`; returns how many values were replaced by new constants
// ("folded_<n>"). `next_name` numbers them across calls.
size_t fold_constants(ir::Graph& g, const FoldOptions& options, int& next_name);

}  // namespace kiln::passes
