// The fused attention's portable inner loops: 4-float vectors of the baseline target (SSE2 on
// x86-64), no FMA (attention_block.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_family.h"

namespace kiln::cpu::gemm {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction set

constexpr int kLanes = 4;
using V = float __attribute__((vector_size(16)));
using VI = int32_t __attribute__((vector_size(16)));
inline V madd(V a, V b, V c) {
  return a * b + c;
}
// Of 16 xmm registers: the rest hold the loaded vectors and the broadcast.
constexpr int64_t kAccumulators = 8;

}  // namespace
}  // namespace kiln::cpu::gemm

#include "attention_block.h"  // inside the target: it takes this instruction set

namespace kiln::cpu::gemm {

const AttentionFamily kGenericAttention{"generic", scratch_floats, attention_rows};

}  // namespace kiln::cpu::gemm
