// Planning a row-major matmul as cuBLASLt's column-major GEMM (kiln/cuda/gemm.h). No GPU here:
// tests run the plans through a column-major reference GEMM against the CPU's matmul.
#include <algorithm>

#include "kiln/cuda/gemm.h"
#include "kiln/error.h"

namespace kiln::cuda {

namespace {

// The row-major R x C matrix with strides (row, col) as cuBLASLt's operand for its transpose;
// false when neither its rows nor its columns are contiguous.
bool as_transposed_operand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                           GemmMatrix& out) {
  // Unit column stride: stored column-major it is C x R (its transpose), leading dim = row stride.
  if ((col_stride == 1 || cols == 1) && (row_stride >= std::max<int64_t>(cols, 1) || rows == 1)) {
    out = {cols, rows, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride, false, 0};
    return true;
  }
  // Unit row stride: stored column-major it is R x C itself; the GEMM reads its transpose.
  if ((row_stride == 1 || rows == 1) && (col_stride >= std::max<int64_t>(rows, 1) || cols == 1)) {
    out = {rows, cols, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride, true, 0};
    return true;
  }
  return false;
}

// A batch dim of the output and each operand's stride along it (X, Y, D order).
struct BatchDim {
  int64_t size;
  std::array<int64_t, 3> strides;
};

// Operand `sizes`/`strides`' stride along output batch dim `d` of `batch_rank` (0 where it
// broadcasts).
int64_t batch_stride(IntList sizes, IntList strides, size_t d, size_t batch_rank) {
  const int64_t own_batch = static_cast<int64_t>(sizes.size()) - 2;
  const int64_t j = static_cast<int64_t>(d) - (static_cast<int64_t>(batch_rank) - own_batch);
  if (j < 0 || sizes[static_cast<size_t>(j)] == 1) return 0;
  return strides[static_cast<size_t>(j)];
}

}  // namespace

GemmPlan plan_gemm(IntList a_sizes, IntList a_strides, IntList b_sizes, IntList b_strides,
                   IntList out_sizes) {
  KILN_CHECK(a_sizes.size() >= 2 && b_sizes.size() >= 2 && out_sizes.size() >= 2,
             "[matmul] the CUDA kernel expects operands of rank 2 or more, got ",
             shape_str(a_sizes), " and ", shape_str(b_sizes), ".");
  GemmPlan plan;
  const size_t ra = a_sizes.size(), rb = b_sizes.size(), rc = out_sizes.size();
  const int64_t M = out_sizes[rc - 2], N = out_sizes[rc - 1], K = a_sizes[ra - 1];
  plan.m = N;
  plan.n = M;
  plan.k = K;
  plan.b_needs_copy = !as_transposed_operand(K, N, b_strides[rb - 2], b_strides[rb - 1], plan.x);
  plan.a_needs_copy = !as_transposed_operand(M, K, a_strides[ra - 2], a_strides[ra - 1], plan.y);
  plan.d = {N, M, std::max<int64_t>(N, 1), false, 0};
  if (plan.a_needs_copy || plan.b_needs_copy) return plan;

  // Batch dims, innermost first, with size-1 dims dropped and neighbours merged where all
  // three operands step over both as over one.
  const size_t batch_rank = rc - 2;
  std::vector<BatchDim> dims;
  int64_t d_stride = M * N;
  for (size_t d = batch_rank; d-- > 0;) {
    const int64_t size = out_sizes[d];
    BatchDim dim{size,
                 {batch_stride(b_sizes, b_strides, d, batch_rank),
                  batch_stride(a_sizes, a_strides, d, batch_rank), d_stride}};
    d_stride *= size;
    if (size == 1) continue;
    if (!dims.empty()) {
      BatchDim& inner = dims.back();
      bool merges = true;
      for (size_t i = 0; i < 3; ++i) merges = merges && dim.strides[i] == inner.strides[i] * inner.size;
      if (merges) {
        inner.size *= size;
        continue;
      }
    }
    dims.push_back(dim);
  }
  if (!dims.empty()) {
    plan.batch = dims.front().size;
    plan.x.batch_stride = dims.front().strides[0];
    plan.y.batch_stride = dims.front().strides[1];
    plan.d.batch_stride = dims.front().strides[2];
  }
  // The outer batch dims, enumerated: one call each.
  plan.calls.push_back({0, 0, 0});
  for (size_t i = 1; i < dims.size(); ++i) {
    std::vector<std::array<int64_t, 3>> next;
    for (int64_t index = 0; index < dims[i].size; ++index)
      for (const auto& call : plan.calls)
        next.push_back({call[0] + index * dims[i].strides[0], call[1] + index * dims[i].strides[1],
                        call[2] + index * dims[i].strides[2]});
    plan.calls = std::move(next);
  }
  return plan;
}

}  // namespace kiln::cuda
