// Eager layer_norm and batch_norm, forward and backward, on GPUs, as generated kernels (float32
// and float64, like the CPU kernels):
//   - layer_norm: a block per row finds the mean, then the centered variance (two block-wide
//     sums, in the input's type as on the CPU), then writes the normalized row.
//   - layer_norm_backward: a block per row for the input's gradient; a thread per normalized
//     element sums the weight's and bias's gradients down the rows.
//   - batch_norm: a block per channel sums its N x S elements in float64 (mean, then the
//     centered squares), writes the saved statistics and the new running ones, and folds
//     weight and bias into a scale and shift; a thread per element then applies them.
//   - batch_norm_backward: a block per channel sums the gradient and gradient x centered input
//     in float64 into the weight's and bias's gradients and three coefficients; a thread per
//     element then writes the input's gradient as A * grad + B * x + K.
#pragma once

#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

enum class NormKernel {
  LayerNorm,         // (const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, long long rows,
                     //  long long n, double eps); w and b may be null
  LayerNormGrad,     // (const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* gx,
                     //  long long rows, long long n)
  LayerNormParams,   // (const T* g, const T* x, const T* mean, const T* rstd, T* gw, T* gb,
                     //  long long rows, long long n)
  BatchStats,        // (const T* x, const T* w, const T* b, const T* running_mean,
                     //  const T* running_var, T* save_mean, T* save_invstd, T* new_mean,
                     //  T* new_var, T* coef, long long N, long long C, long long S, int training,
                     //  double momentum, double eps): coef = [0, scale, shift] per channel
  BatchGradStats,    // (const T* g, const T* x, const T* w, const T* mean, const T* invstd, T* gw,
                     //  T* gb, T* coef, long long N, long long C, long long S): coef = [A, B, K]
  ChannelAffine,     // (const T* g, const T* x, const T* coef, T* out, long long count, long long C,
                     //  long long S): out = A * g + B * x + K per channel (no A * g when g is null)
};

// The CUDA C of `kind`'s kernel for float32 or float64, an entry named `name`.
std::string norm_kernel_source(NormKernel kind, DType dtype, const std::string& name);

// Fills the CUDA kernel slots of layer_norm, layer_norm_backward, batch_norm and
// batch_norm_backward.
void register_norm_kernels();

}  // namespace kiln::cuda
