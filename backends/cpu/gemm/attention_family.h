// The fused attention's per-instruction-set entry points (attention_block.h has their body)
// and the block sizes the driver and the bodies share.
#pragma once

#include <cstdint>

#include "kiln/cpu/gemm/attention.h"

namespace kiln::cpu::gemm {

// Keys per block: the score tile of a block of queries (128 x 64 floats) and the keys and
// values it reads stay in L2 while the block is computed.
constexpr int64_t kAttentionKeyBlock = 128;
// Queries per block, at most: a longer query sequence is cut into equal blocks.
constexpr int64_t kAttentionQueryBlock = 64;

struct AttentionFamily {
  const char* isa;  // the GEMM micro-kernel family it belongs to (and whose CPU check it shares)
  // Floats of scratch `rows` queries per block need.
  int64_t (*scratch_floats)(const AttentionArgs& args, int64_t rows);
  // Queries [i0, i1) of slice b, all keys: args.out (and args.lse) for those rows.
  void (*rows)(const AttentionArgs& args, int64_t b, int64_t i0, int64_t i1, float* scratch);
};

extern const AttentionFamily kAvx512Attention;
extern const AttentionFamily kAvx2Attention;
extern const AttentionFamily kGenericAttention;

}  // namespace kiln::cpu::gemm
