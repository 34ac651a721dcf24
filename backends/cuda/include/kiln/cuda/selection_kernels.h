// masked_select and nonzero on CUDA tensors. The output order is row-major, so each position's
// place in the output is the count of selected elements before it: the input is cut into
// chunks of 1024 elements; one thread per chunk counts its selected elements, one thread turns
// the counts into offsets (an exclusive scan over n / 1024 values), and one thread per chunk
// writes its elements from its offset. Positions past the selected ones get the fill. O(n)
// work with n / 1024 threads in the passes over the data.
#pragma once

#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

enum class SelectionKernel {
  Count,          // (const F* flags, long long n, long long chunk, long long chunks, long long* counts)
  Scan,           // (long long* counts, long long chunks, long long* total): counts -> offsets
  MaskedWrite,    // (const unsigned char* mask, const T* x, T* out, long long n, long long chunk,
                  //  long long chunks, const long long* offsets, long long size)
  NonzeroWrite,   // (const F* x, long long* out, long long n, long long chunk, long long chunks,
                  //  const long long* offsets, long long size, KilnSelectDims dims)
  Pad,            // (T* out, long long count, long long width, const long long* total, T fill)
};

// The CUDA C of `kind`'s kernel for elements of `dtype` (the flags' for Count and
// NonzeroWrite, the values' for MaskedWrite and Pad), an entry named `name`.
std::string selection_kernel_source(SelectionKernel kind, DType dtype, const std::string& name);

// Fills the CUDA kernel slots of masked_select and nonzero.
void register_selection_kernels();

}  // namespace kiln::cuda
