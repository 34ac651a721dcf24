// Selections whose size depends on the data: masked_select, nonzero/argwhere and unique, with
// PyTorch's names and results.
//
// Eagerly they count first (one read of the data, as PyTorch's synchronize on a GPU). Under
// kiln::compile that read is a graph break (the forward is split there; under fullgraph it is
// a GraphBreakError saying so). To keep them inside one graph, pass `size`, a bound known
// before the data (JAX's size=): the result then always has that length, padded with
// fill_value when fewer elements are selected and cut when more are.
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// The elements of x where mask is true (x and mask broadcast together), in row-major order, as
// a 1-D tensor. Differentiable in x.
Tensor masked_select(const Tensor& x, const Tensor& mask, std::optional<int64_t> size = std::nullopt,
                     double fill_value = 0, SourceLoc loc = SourceLoc::current());
// The coordinates of x's nonzero (or true) elements, int64 [count, x.dim()], row-major.
Tensor nonzero(const Tensor& x, std::optional<int64_t> size = std::nullopt, int64_t fill_value = 0,
               SourceLoc loc = SourceLoc::current());
// nonzero's other name (torch.argwhere).
Tensor argwhere(const Tensor& x, std::optional<int64_t> size = std::nullopt, int64_t fill_value = 0,
                SourceLoc loc = SourceLoc::current());

struct UniqueResult {
  Tensor values;   // the distinct values of x, ascending (1-D)
  Tensor inverse;  // int64, x's shape: where each element of x is in values
  Tensor counts;   // int64, values' shape: how often each value occurs
};
// x's distinct values over all its elements (PyTorch's torch.unique without dim; kiln always
// sorts, and always fills inverse and counts). NaNs are distinct from each other, as in PyTorch.
UniqueResult unique(const Tensor& x, SourceLoc loc = SourceLoc::current());

}  // namespace kiln
