// Running sums and products along a dim (PyTorch's cumsum and cumprod). Floating inputs keep
// their dtype; bool and integer inputs give int64 unless `dtype` says otherwise (x is converted
// to it first, as PyTorch's dtype argument does).
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...] along dim.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// out[..., i, ...] = x[..., 0, ...] * ... * x[..., i, ...] along dim. Its gradient is exact
// where x holds zeros (no division by them).
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace kiln
