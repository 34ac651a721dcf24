// Eager losses on GPUs. nll_loss and nll_loss_backward (with log_softmax, cross-entropy): two
// generated kernels, one thread per target element: the first reads each target's
// log-probability and class weight (the reductions then sum them), the second writes each
// target's gradient into its class of the zeroed input gradient. Targets are checked on the
// GPU first (the first out-of-range class read back for the CPU kernel's error: one
// synchronization per call, where PyTorch asserts on the device); the mean's total weight
// stays on the GPU. binary_cross_entropy: elementwise, its inputs checked on the GPU (the
// first outside [0, 1] read back for the CPU's message).
#pragma once

#include <string>

#include "kiln/dtype.h"

namespace kiln::cuda {

// `extern "C" __global__ void name(const T* input, const long long* target, const T* weight,
//  T* loss, T* weights, long long n, long long classes, long long inner, long long ignore)`:
// per target element i, its loss -w[t] * input[n, t, s] and its weight w[t] (0 and 0 for
// ignored targets); weight may be null (every class weighs 1), and input and loss may be
// null together (the weights only).
std::string nll_loss_kernel_source(DType dtype, const std::string& name);

// `extern "C" __global__ void name(const T* grad, int grad_per_element, const long long* target,
//  const T* weight, const T* divisor, T* out, long long n, long long classes,
//  long long inner, long long ignore)`: out[n, t, s] = -w[t] * g * (1 / divisor[0]) (in
// float64, as the CPU kernel; no divisor: 1) for each counted target; out is zeroed before.
std::string nll_loss_backward_kernel_source(DType dtype, const std::string& name);

// `extern "C" __global__ void name(const T* x, const T* target, T* out, long long n,
//  long long* first_bad)`: binary_cross_entropy elementwise (each log clamped at -100);
// first_bad gets the first element of x outside [0, 1].
std::string binary_cross_entropy_kernel_source(DType dtype, const std::string& name);

// Fills the CUDA kernel slots of nll_loss, nll_loss_backward and binary_cross_entropy
// (binary_cross_entropy_with_logits is elementwise).
void register_loss_kernels();

}  // namespace kiln::cuda
