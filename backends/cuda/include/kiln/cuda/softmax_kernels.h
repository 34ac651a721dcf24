// Eager softmax and log_softmax on GPUs: a generated kernel (CUDA C, NVRTC, as the
// reductions) that gives each row along the op's dim a block. The block finds the row's
// maximum, then the sum of exp(x - max), each combined across its threads, then writes
// exp(x - max) / sum, or x - max - log(sum): three reads of the row, one write.
#pragma once

#include <string>

#include "kiln/cuda/reduction_kernels.h"

namespace kiln::cuda {

// The CUDA C of one kernel named `name`: `extern "C" __global__ void name(const T* in, T* out,
// long long rows, long long cols, KilnReduceDims dims)`, where `plan` (of a contiguous input,
// reduced over the op's dim) locates both the input's and the output's elements.
std::string softmax_kernel_source(bool log, DType dtype, const ReductionPlan& plan,
                                  const std::string& name);

// Fills the CUDA kernel slots of softmax and log_softmax.
void register_softmax_kernels();

}  // namespace kiln::cuda
