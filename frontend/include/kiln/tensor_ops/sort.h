// Ordering the elements of a tensor along a dim: sort, argsort, msort, topk and kthvalue, and
// searching sorted lines: searchsorted and bucketize, with PyTorch's names and defaults.
//
// kiln's order is total and the same on every device: NaN ranks above every number (last when
// ascending, first when descending), and equal values keep their order along the dim. Every
// sort is therefore stable (`stable` is accepted for PyTorch's signature and changes nothing),
// and the CPU and GPU return the same indices. The values are differentiable: their gradient
// flows back to the positions the indices name.
#pragma once

#include <string_view>

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

// Where each value goes in a sorted sequence to keep it sorted (int64, or int32 with
// out_int32): the count of the sequence's elements below the value (the first such place), or
// with right = true (or side = "right") not above it (the last). A 1-D sequence serves values
// of any shape; a sequence [..., M] searches values [..., N] line by line. `sorter` (int64,
// shaped like the sequence) gives the order of an unsorted sequence, as argsort returns it.
// The sequence is ranked as sort ranks it (NaN last) and is not checked to be sorted. Values
// and sequence are promoted to one dtype. Not differentiable. One binary search per value.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false,
                    bool right = false, std::string_view side = "", const Tensor& sorter = Tensor());
Tensor searchsorted(const Tensor& sorted_sequence, Scalar value, bool out_int32 = false, bool right = false,
                    std::string_view side = "", const Tensor& sorter = Tensor());
// The bucket of each element of x among 1-D sorted boundaries: searchsorted(boundaries, x).
// right = false: boundaries[i-1] < x <= boundaries[i]; right = true: boundaries[i-1] <= x <
// boundaries[i].
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32 = false, bool right = false);

// A histogram of x's elements (floating) in `bins` equal bins over [min, max], as PyTorch's
// histc: elements outside (and NaN) are not counted, max itself falls in the last bin, and
// min == max takes the data's own range (a host read: under compile, a graph break). The
// counts have x's dtype. Not differentiable.
Tensor histc(const Tensor& x, int64_t bins = 100, double min = 0, double max = 0);

}  // namespace kiln
