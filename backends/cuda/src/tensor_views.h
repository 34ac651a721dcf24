// Views that CUDA kernels composing other ops (conv2d, attention) or reading back one element
// (the failure flags' culprits) take of tensors, through the runtime's Tensor::alias: the
// frontend's view functions are not the device layer's to call.
#pragma once

#include "kiln/shape.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

// The contiguous `t` read as `sizes` (same element count).
inline Tensor reshaped(const Tensor& t, IntList sizes) {
  return t.alias(sizes, contiguous_strides(sizes), t.storage_offset());
}

// `t` with its last two dims swapped.
inline Tensor last_two_swapped(const Tensor& t) {
  Shape sizes(t.sizes()), strides(t.strides());
  std::swap(sizes[sizes.size() - 1], sizes[sizes.size() - 2]);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return t.alias(sizes, strides, t.storage_offset());
}

// `count` entries of the contiguous `t` along dim 0 from `start`.
inline Tensor leading_slice(const Tensor& t, int64_t start, int64_t count) {
  Shape sizes(t.sizes());
  sizes[0] = count;
  return t.alias(sizes, t.strides(), t.storage_offset() + start * t.stride(0));
}

// Element `k` (row-major) of the contiguous `t`, as a 0-d view.
inline Tensor element(const Tensor& t, int64_t k) { return t.alias({}, {}, t.storage_offset() + k); }

}  // namespace kiln::cuda
