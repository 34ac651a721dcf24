// Views and copies as free functions (Tensor has the same as methods).
#pragma once

#include <vector>

#include "kiln/tensor.h"

namespace kiln {

Tensor reshape(const Tensor& x, IntList sizes);  // a view when strides allow, else a copy
Tensor view(const Tensor& x, IntList sizes);     // always a view (error when impossible)
Tensor permute(const Tensor& x, IntList dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
// Every select along dim, as views (torch.unbind). Its gradient is one stack.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
Tensor expand(const Tensor& x, IntList sizes);
Tensor broadcast_to(const Tensor& x, IntList sizes);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor as_strided(const Tensor& x, IntList sizes, IntList strides, int64_t offset = 0);
Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t start, int64_t end,
                     int64_t step = 1);
Tensor clone(const Tensor& x);
Tensor contiguous(const Tensor& x);

}  // namespace kiln
