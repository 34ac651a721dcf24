// Layout functions: cat, stack, split, chunk, gather, scatter, scatter_add, scatter_reduce,
// index_select, index_add, masked_fill, tril, triu. Index tensors are int64; an index out of range
// throws kiln::Error.
#pragma once

#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Joins tensors along an existing dim (promoting their dtypes). Every other dim must
// match; 1-D empty tensors are skipped, as in PyTorch.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equally shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// Views of x cut along dim: pieces of split_size (the last may be smaller), or of the
// given sizes (which must add up to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, IntList split_sizes, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, IntList split_sizes, int64_t dim = 0);
// At most `chunks` views of ceil(size / chunks) elements along dim (fewer when they run
// out, as in PyTorch).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// out[i][j] = x[index[i][j]][j] (dim 0); index has x's rank and gives the output shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with src[i][j] added at [index[i][j]][j] (dim 0); duplicates accumulate.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// A copy of x with src[i][j] written at [index[i][j]][j] (dim 0), PyTorch's scatter: where
// several values reach one position, the last in index order along dim wins (the same on
// every device). The Scalar form writes `value` at every position the index names.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
// A copy of x with every src[i][j] combined into [index[i][j]][j] (dim 0) by `reduce`:
// "sum", "prod", "mean", "amax" or "amin". include_self = false leaves x's own value out of
// the positions the index names. "mean" floors for integers; "amax"/"amin" propagate NaN and
// share the gradient evenly among ties, as PyTorch. Differentiable in x and src.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self = true);
// The slices x.select(dim, index[i]) along dim; index is 1-D.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with src.select(dim, i) added to slice index[i] along dim.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// x with `value` where the bool mask (broadcast to x's shape) is true; x's dtype.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);  // 0-d value

// The lower/upper triangle of the last two dims: element (i, j) is kept when
// j - i <= diagonal (tril) or j - i >= diagonal (triu); others become 0.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace kiln
