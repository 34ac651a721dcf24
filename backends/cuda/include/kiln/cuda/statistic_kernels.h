// Eager var and norm on GPUs: generated reductions (as kiln/cuda/reduction_kernels.h: a block
// per output element) whose result is not a plain fold of the elements. var makes two passes
// over each output's elements in float64 (the mean, then the squared deviations from it), as
// exact as the CPU's Welford pass; norm folds a per-element term (|x|, x², |x|^p, x != 0) with
// a sum or, for p = ±inf, a NaN-propagating max/min, and finishes with sqrt or ^(1/p).
#pragma once

#include <string>

#include "kiln/cuda/reduction_kernels.h"

namespace kiln::cuda {

// `extern "C" __global__ void name(const T* in, T* out, long long outputs, long long reduced,
// KilnReduceDims dims, double correction)`: out = sum((x - mean)²) / max(0, n - correction).
std::string var_kernel_source(DType dtype, const ReductionPlan& plan, const std::string& name);

// `extern "C" __global__ void name(const T* in, T* out, long long outputs, long long reduced,
// KilnReduceDims dims)`: the p-norm of each output's elements (p is part of the source).
std::string norm_kernel_source(double p, DType dtype, const ReductionPlan& plan,
                               const std::string& name);

// Fills the CUDA kernel slots of var and norm.
void register_statistic_kernels();

}  // namespace kiln::cuda
