// Tensor control flow: branches and loops whose decisions depend on tensor values, written
// so a compiled forward keeps them inside one graph (as JAX's lax.cond / while_loop /
// fori_loop / scan). Eagerly they simply run (and are differentiable like any C++ loop);
// under a trace each body is recorded once as a region of a single node.
//
//   // while (abs(X).sum() > 1) X = X / 2;   <- a graph break when compiled
//   X = kiln::while_loop([](const kiln::TensorList& c) { return abs(c[0]).sum() > 1; },
//                        [](const kiln::TensorList& c) { return kiln::TensorList{c[0] / 2}; },
//                        {X})[0];
//
// Bodies are functions of their arguments: tensors from outside may be read (they become
// captures), but results must be returned, not written into outer tensors. Every iteration
// and both branches must produce the same types (dtype, shape, device) as the carry.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

using TensorList = std::vector<Tensor>;
using BranchFn = std::function<TensorList(const TensorList&)>;
using LoopCondFn = std::function<Tensor(const TensorList&)>;
using ForiBodyFn = std::function<TensorList(const Tensor& i, const TensorList&)>;
// (carry, x slices) -> (new carry, y slices)
using ScanFn =
    std::function<std::pair<TensorList, TensorList>(const TensorList&, const TensorList&)>;

// true_fn(operands) when pred (a one-element tensor) is true, else false_fn(operands).
TensorList cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn,
                const TensorList& operands);
// while (cond_fn(carry)) carry = body_fn(carry); returns the final carry.
TensorList while_loop(const LoopCondFn& cond_fn, const BranchFn& body_fn, TensorList carry);
// for i in [lower, upper): carry = body_fn(i, carry), i an int64 scalar tensor.
TensorList fori_loop(int64_t lower, int64_t upper, const ForiBodyFn& body_fn, TensorList carry);
struct ScanOptions {
  // Step from the last slice of xs to the first (JAX's reverse=True); ys[t] still belongs to
  // xs[t]. The backward half of a bidirectional RNN, without flipping xs (a flip would bake
  // the sequence length into the graph).
  bool reverse = false;
};

// Runs fn over dim 0 of xs: carry threads through, the y slices stack into ys.
// Returns (final carry, ys).
std::pair<TensorList, TensorList> scan(const ScanFn& fn, TensorList init, const TensorList& xs,
                                       ScanOptions options = {});

}  // namespace kiln
