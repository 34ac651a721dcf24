// Eager 2-D pooling on GPUs, as generated kernels over [N, C, H, W] planes (float32 and
// float64, like the CPU kernels): max_pool2d (with argmax indices; NaN wins, the first maximum
// wins ties, as the CPU kernel takes them), avg_pool2d and adaptive_avg_pool2d, a thread per
// output element; their backward ops. The average poolings' gradients are gathered, a thread
// per input element summing the shares of the windows that cover it in the CPU kernel's
// order, so they need no atomics; max pooling's is scattered to the argmax with atomic adds
// (float sums where windows overlap may round differently between runs, as in PyTorch), its
// indices checked on the GPU.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

enum class PoolKernel {
  Max,               // (const T* x, T* out, long long* indices, long long count, KilnPool p)
  MaxBackward,       // (const T* g, const long long* indices, T* gx, long long count, KilnPool p,
                     //  long long* first_bad)
  Avg,               // (const T* x, T* out, long long count, KilnPool p)
  AvgBackward,       // (const T* g, T* gx, long long count, KilnPool p)
  Adaptive,          // (const T* x, T* out, long long count, KilnPool p)
  AdaptiveBackward,  // (const T* g, T* gx, long long count, KilnPool p)
};

// The geometry every pooling kernel takes (KilnPool in the source). `divisor` is avg_pool2d's
// divisor_override, or 0.
struct PoolGeometry {
  int64_t planes = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t count_include_pad = 1, divisor = 0;
};

// The CUDA C of `kind`'s kernel for float32 or float64, an entry named `name`.
std::string pool_kernel_source(PoolKernel kind, DType dtype, const std::string& name);

// Fills the CUDA kernel slots of max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward
// ops.
void register_pool_kernels();

}  // namespace kiln::cuda
