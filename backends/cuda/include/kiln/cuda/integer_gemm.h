// matmul of int32 and int64 CUDA tensors, which cuBLASLt does not multiply: a generated
// kernel, a thread per output element summing its row-by-column products with wrapping
// integer arithmetic (as the CPU kernel), operands read through their strides and broadcast
// batch dims. Exact, and meant for correctness rather than speed.
#pragma once

#include <string>

#include "kiln/dtype.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

// `extern "C" __global__ void name(const T* a, const T* b, T* out, long long count,
//  KilnMatmul p)` for int32 or int64.
std::string integer_gemm_source(DType dtype, const std::string& name);

// out [..., M, N] (contiguous) = a [..., M, K] · b [..., K, N], batch dims broadcasting.
void integer_matmul(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace kiln::cuda
