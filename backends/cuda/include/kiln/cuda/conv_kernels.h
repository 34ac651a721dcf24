// Eager conv2d and its two gradient ops on GPUs, as im2col + GEMM (float32 and float64):
//   - conv2d: a generated kernel unfolds each sample's windows into columns [G, K, L]
//     (K = C/G · kh · kw taps, L = OH · OW positions), then cuBLASLt multiplies the weight
//     [G, OC/G, K] into the output, a batched GEMM per chunk of samples; the bias is added
//     by the elementwise kernel.
//   - conv2d_input_grad: the weight's transpose times the gradient gives the columns'
//     gradient, which a generated kernel folds back (col2im), a thread per input element
//     gathering the taps that read it (no atomics).
//   - conv2d_weight_grad: the gradient times the columns' transpose, summed over the samples.
// Samples go in chunks whose columns fit kColumnBudgetBytes. Where cuDNN is loaded
// (kiln/cuda/cudnn.h) and enabled, the three ops go to it instead (one cuDNN call each, its
// heuristic's algorithm, no columns in memory); a configuration it has no algorithm for falls
// back to im2col.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

// The most bytes of columns one chunk of samples unfolds into.
inline constexpr int64_t kColumnBudgetBytes = int64_t{256} << 20;

enum class ConvKernel {
  Im2Col,  // (const T* x, T* cols, long long count, KilnConv p): cols [n, G, K, L]
  Col2Im,  // (const T* cols, T* gx, long long count, KilnConv p): gx [n, C, H, W]
};

// The geometry both kernels take (KilnConv in the source).
struct ConvGeometry {
  int64_t C = 0, H = 0, W = 0, G = 1, Cg = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// The CUDA C of `kind`'s kernel for float32 or float64, an entry named `name`.
std::string conv_kernel_source(ConvKernel kind, DType dtype, const std::string& name);

// Fills the CUDA kernel slots of conv2d, conv2d_input_grad and conv2d_weight_grad.
void register_conv_kernels();

// Convolutions through cuDNN where it is loaded: on by default, as PyTorch's
// torch.backends.cudnn.enabled; off, they run as im2col + cuBLASLt.
void set_cudnn_enabled(bool enabled);
bool cudnn_enabled();
// Why convolutions on GPU `device` do not go through cuDNN (off, not found, no handle on the
// GPU); "" when they do.
std::string cudnn_unavailable_reason(int device = 0);

}  // namespace kiln::cuda
