// GEMM on GPUs through cuBLASLt (kiln/cuda/cublaslt.h): the matmul op's CUDA kernel.
//
// kiln's tensors are row-major and cuBLASLt's matrices column-major, so C = A·B runs as
// Cᵀ = Bᵀ·Aᵀ: a row-major matrix read in column-major order is its transpose, with the same
// leading dimension. A view whose rows or columns are contiguous (a transpose, a slice) goes
// to cuBLASLt as it is, with a transpose flag; any other view is made contiguous first. Batch
// dims merge where every operand steps over them uniformly (one strided-batched call); a
// broadcast batch dim has stride 0; batch dims that stay apart become a loop of calls.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kiln/shape.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

// TF32 tensor cores for float32 GEMMs (inputs rounded to 10 mantissa bits, float32
// accumulation): off by default, as PyTorch's torch.backends.cuda.matmul.allow_tf32.
void set_allow_tf32(bool allow);
bool allow_tf32();

// One operand as cuBLASLt sees it: a column-major matrix as stored, and whether the GEMM
// reads its transpose.
struct GemmMatrix {
  int64_t rows = 0, cols = 0, ld = 1;
  bool transposed = false;
  int64_t batch_stride = 0;  // elements between the matrices of one batched call
};

// D (m x n) = op(X) (m x k) · op(Y) (k x n), column-major: X is the matmul's right operand B,
// Y its left operand A, D its output C, each seen transposed.
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
  GemmMatrix x, y, d;
  int64_t batch = 1;  // matrices per call
  // Per call, the element offsets of X, Y and D (one call when every batch dim merged).
  std::vector<std::array<int64_t, 3>> calls;
  // Neither the rows nor the columns of A (or B) are contiguous: copy it first, then plan again.
  bool a_needs_copy = false, b_needs_copy = false;
};

// The plan for out = a · b: a is [..., M, K], b [..., K, N] (each of rank 2 or more, batch dims
// broadcasting), out the contiguous [..., M, N].
GemmPlan plan_gemm(IntList a_sizes, IntList a_strides, IntList b_sizes, IntList b_strides,
                   IntList out_sizes);

// What cuBLASLt applies to a product as it stores it: out = activation(a · b + bias). The
// backend cuda's "gemm" groups (kiln/cuda/exec/gemm_epilogue.h) run a Linear layer's bias and
// activation this way instead of as a kernel of their own.
enum class GemmActivation { None, Relu, GeluTanh };
struct GemmEpilogue {
  Tensor bias;  // [N], the product's dtype, on its GPU; undefined: no bias
  GemmActivation activation = GemmActivation::None;
};

// out = epilogue(a · b): a [M, K] and b [K, N] float32 or float64 tensors on one GPU (views
// with contiguous rows or columns go as they are), out the contiguous [M, N]. Queued on the
// current stream. Throws kiln::Error naming what does not fit.
void matmul_with_epilogue(const Tensor& a, const Tensor& b, const GemmEpilogue& epilogue,
                          const Tensor& out);

// Fills matmul's CUDA kernel slot (register_backend calls it).
void register_gemm_kernels();

}  // namespace kiln::cuda
