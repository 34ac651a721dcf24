// The fused attention's inner loops for AVX2 + FMA: 8 floats per ymm register (attention_block.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_family.h"  // before the target pragma, as every header: see attention_block.h

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace kiln::cpu::gemm {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction set

constexpr int kLanes = 8;
using V = float __attribute__((vector_size(32)));
using VI = int32_t __attribute__((vector_size(32)));
inline V madd(V a, V b, V c) {
  return _mm256_fmadd_ps(a, b, c);
}
// Of 16 ymm registers: the rest hold the loaded vectors and the broadcast.
constexpr int64_t kAccumulators = 8;

}  // namespace
}  // namespace kiln::cpu::gemm

#include "attention_block.h"  // inside the target: it takes this instruction set

namespace kiln::cpu::gemm {

const AttentionFamily kAvx2Attention{"avx2", scratch_floats, attention_rows};

}  // namespace kiln::cpu::gemm

#pragma GCC pop_options
