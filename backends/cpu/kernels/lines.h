// The lines of a tensor along a dim: every run of elements along `dim` with the other
// coordinates fixed. Kernels that carry a dependence along a dim (scans, sorts) walk a tensor
// line by line; lines are independent, so they split across threads. Lines are numbered in
// row-major order of the other coordinates, so line l of an input and line l of a contiguous
// output of the same shape (except along dim) are the same line.
#pragma once

#include "kiln/tensor.h"

namespace kiln::cpu::kernels {

struct Lines {
  int64_t count = 1;   // lines
  int64_t length = 1;  // elements per line
  int64_t step = 0;    // element stride along the line
  Shape other_sizes, other_strides;

  Lines(const Tensor& t, int64_t dim) {
    for (int64_t k = 0; k < t.dim(); ++k) {
      if (k == dim) {
        length = t.size(k);
        step = t.stride(k);
      } else {
        other_sizes.push_back(t.size(k));
        other_strides.push_back(t.stride(k));
        count *= t.size(k);
      }
    }
  }

  // The element offset of line `line`'s first element, from the tensor's storage offset.
  int64_t start(int64_t line) const {
    int64_t offset = 0;
    for (size_t k = other_sizes.size(); k-- > 0;) {
      offset += (line % other_sizes[k]) * other_strides[k];
      line /= other_sizes[k];
    }
    return offset;
  }
};

// The typed element pointer of `t` at its storage offset.
template <class T>
T* elements_of(const Tensor& t) {
  return static_cast<T*>(t.impl()->storage->data()) + t.storage_offset();
}

}  // namespace kiln::cpu::kernels
