// kiln's fused float32 attention, flash-attention style: for each block of queries, the
// keys are visited in blocks; each block's scores q kᵀ (+ mask) stay in a small tile, an
// online softmax keeps each query's running maximum and sum, and the tile's weights are
// multiplied into the output accumulator at once. The [L, S] score matrix is never stored,
// and strided operands (the heads of a packed q/k/v projection) are read in place. The
// inner loops come in one instruction set per file (AVX-512, AVX2 + FMA, portable vectors)
// and are chosen by the CPU's features at run time, like the GEMM's micro-kernels.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::cpu::gemm {

// One attention problem over `batch` independent (batch, head) slices. Element offsets are
// in floats (bytes for the bool mask); row strides may be anything, the last dim of q, k
// and v must be contiguous.
struct AttentionArgs {
  int64_t batch = 0, queries = 0, keys = 0, depth = 0, value_depth = 0;
  const float* q = nullptr;  // q[q_batch[b] + i * q_row + d]
  const float* k = nullptr;  // k[k_batch[b] + j * k_row + d]
  const float* v = nullptr;  // v[v_batch[b] + j * v_row + e]
  std::vector<int64_t> q_batch, k_batch, v_batch;
  int64_t q_row = 0, k_row = 0, v_row = 0;
  // Optional mask at mask[mask_batch[b] + i * mask_row + j * mask_col]: additive floats, or
  // bytes (bool: nonzero = may attend) when mask_is_bool.
  const void* mask = nullptr;
  bool mask_is_bool = false;
  std::vector<int64_t> mask_batch;
  int64_t mask_row = 0, mask_col = 0;
  float scale = 1;
  bool causal = false;
  float* out = nullptr;  // dense [batch, queries, value_depth]
  float* lse = nullptr;  // dense [batch, queries], or null: not computed
};

// Runs the problem on kiln's threads with the micro-kernel family `isa` ("avx512", "avx2",
// "generic"; empty: default_kernel()'s, which KILN_GEMM_KERNEL can set).
void attention(const AttentionArgs& args, std::string_view isa = {});

}  // namespace kiln::cpu::gemm
