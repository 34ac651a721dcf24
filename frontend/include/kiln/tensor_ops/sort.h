// Ordering the elements of a tensor along a dim: sort, argsort, msort, topk and kthvalue,
// with PyTorch's names and defaults.
//
// kiln's order is total and the same on every device: NaN ranks above every number (last when
// ascending, first when descending), and equal values keep their order along the dim. Every
// sort is therefore stable (`stable` is accepted for PyTorch's signature and changes nothing),
// and the CPU and GPU return the same indices. The values are differentiable: their gradient
// flows back to the positions the indices name.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// What sort, topk and kthvalue return: the values, and where along the dim each came from
// (int64). `auto [values, indices] = kiln::sort(x);`
struct ValuesAndIndices {
  Tensor values;
  Tensor indices;
};

ValuesAndIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// sort's indices alone.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// x sorted along dim 0 (the values only).
Tensor msort(const Tensor& x);
// The k largest (or smallest) of every line along dim, largest (or smallest) first. kiln always
// returns them in order; `sorted` is accepted for PyTorch's signature.
ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
// The k-th smallest (k counts from 1) of every line along dim; dim is dropped unless keepdim.
ValuesAndIndices kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);

}  // namespace kiln
