// Advanced indexing with tensors, PyTorch's `x[i0, i1, ...]` and `x[i0, i1, ...] = v`.
//
// `indices` holds one entry per leading dim of x: an int64 (or int32) tensor picks positions
// along its dim (negative ones count from the end), a bool tensor is a mask over as many dims
// as it has, and an undefined Tensor keeps its dim whole (`:`). The index tensors broadcast to
// one shape B. The result has B in place of the indexed dims when those are adjacent, and B
// first otherwise, as in PyTorch. An int index is a gather; a bool mask needs the count of
// its true elements (nonzero), so under kiln::compile it is a graph break, except in
// index_put with a single value, which is a `where`.
#pragma once

#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// x[indices...]: a new tensor (not a view). Out-of-range positions are an error naming the dim.
// `loc` names the caller's line in a bool mask's graph break.
Tensor index(const Tensor& x, const std::vector<Tensor>& indices, SourceLoc loc = SourceLoc::current());
// A copy of x with `values` (broadcast to index(x, indices)'s shape) written at the indexed
// positions, or added there with accumulate (duplicates then add up; without it the last
// duplicate in order wins).
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false, SourceLoc loc = SourceLoc::current());
// The same, written into x (x.copy_), returning x.
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false, SourceLoc loc = SourceLoc::current());

}  // namespace kiln
