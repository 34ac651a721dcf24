// Eager layout and index ops on GPUs: cat and slice_scatter (copies into views of the
// output, by the elementwise copy kernel), and generated kernels for pad and pad_backward,
// index_select and embedding (row gathers), index_add and embedding_backward (row scatters),
// gather, scatter_add and one_hot.
//
// Indices are checked on the GPU before any kernel uses them: a kernel finds the first one out
// of range and the host reads that one result back (one synchronization per call, where
// PyTorch asserts on the device), then fails with the CPU kernel's message. Scatters add
// with atomics, so float sums over duplicate indices may round differently from run to run
// (as PyTorch's CUDA index_add does); the CPU kernels add in one fixed order.
#pragma once

#include <string>

#include "kiln/dtype.h"
#include "kiln/ops/pad.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

enum class IndexKernel {
  Check,       // (const long long* index, long long n, long long size, long long allowed,
               //  int has_allowed, long long* first_bad): the first element outside [0, size)
  Rows,        // (const T* x, const long long* index, T* out, long long count, long long m,
               //  long long n, long long inner): out[o, k, j] = x[o, index[k], j]
  AddRows,     // (const T* src, const long long* index, T* out, long long count, long long m,
               //  long long n, long long inner, long long skip): out[o, index[k], j] +=
               //  src[o, k, j] where index[k] != skip
  Gather,      // (const T* x, const long long* index, T* out, long long count, KilnIndexDims)
  ScatterAdd,  // (const T* src, const long long* index, T* out, long long count, KilnIndexDims)
  // scatter_reduce's passes, over the index with scatter_add's KilnIndexDims (out contiguous,
  // so a position's offset also indexes the per-position counts and winners):
  ScatterCount,    // (const long long* index, long long* counts, long long count, KilnIndexDims):
                   //  how many values reach each position
  ScatterReset,    // (const long long* index, T* out, long long count, KilnIndexDims, T identity):
                   //  include_self = false: the positions reached start from the identity
  ScatterCombine,  // (const T* src, const long long* index, T* out, long long count,
                   //  KilnIndexDims, int op): atomically combine (0 sum, 1 prod, 2 max, 3 min)
  ScatterWinner,   // (const long long* index, long long* winner, long long count, KilnIndexDims):
                   //  "replace": the last index element reaching each position
  ScatterTake,     // (const T* src, const long long* index, const long long* winner, T* out,
                   //  long long count, KilnIndexDims): the winner writes its value
  ScatterMean,     // (const long long* counts, T* out, long long count, int include_self): over
                   //  out, divides each reached position by its count (floor for integers)
  OneHot,      // (const long long* index, long long* out, long long count, long long classes)
  Pad,         // (const T* x, T* out, long long count, KilnPadDims, T fill)
  PadBackward  // (const T* grad, T* grad_x, long long count, KilnPadDims)
};

// The CUDA C of `kind`'s kernel for elements of `dtype` (ignored by Check and OneHot), an
// entry named `name`. The scatters (AddRows, ScatterAdd, PadBackward) take bool, int32,
// int64, float32 and float64.
std::string index_kernel_source(IndexKernel kind, DType dtype, const std::string& name);

// The parameter structs of Gather/ScatterAdd and Pad/PadBackward (KilnIndexDims and
// KilnPadDims in the source).
struct IndexDims {
  int64_t rank = 0, dim = 0;
  int64_t sizes[8] = {};          // the index's
  int64_t index_strides[8] = {};  // contiguous
  int64_t data_strides[8] = {};   // gather: x's; scatter_add: out's
  int64_t other_strides[8] = {};  // scatter_add: src's
};
struct PadDims {
  int64_t rank = 0;
  int64_t out_sizes[8] = {}, in_sizes[8] = {}, left[8] = {}, in_strides[8] = {};
  int64_t mode = 0;  // 0 constant, 1 reflect, 2 replicate, 3 circular
};

// Gather's and scatter_add's: over the contiguous `index`, reading or writing `data` along
// `dim`, and scatter_add's src (`other`).
IndexDims index_dims(const Tensor& index, const Tensor& data, const Tensor& other, int64_t dim);
// Pad's: the input of sizes `in` (with `in_strides`) padded to `out` by `a`; pad_backward's
// with the gradient as out and the input's gradient (contiguous) as in.
PadDims pad_dims(IntList in, IntList out, IntList in_strides, const ops::PadAttrs& a);

// Fills the CUDA kernel slots of cat, slice_scatter, pad, pad_backward, index_select,
// index_add, gather, scatter_add, embedding, embedding_backward and one_hot.
void register_index_kernels();

}  // namespace kiln::cuda
