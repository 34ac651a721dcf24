// The fused attention's inner loops for AVX-512: 16 floats per zmm register, FMA
// (attention_block.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_family.h"  // before the target pragma, as every header: see attention_block.h

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,fma")

namespace kiln::cpu::gemm {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction set

constexpr int kLanes = 16;
using V = float __attribute__((vector_size(64)));
using VI = int32_t __attribute__((vector_size(64)));
inline V madd(V a, V b, V c) {
  return _mm512_fmadd_ps(a, b, c);
}
// Of 32 zmm registers: the rest hold the loaded vectors and the broadcast.
constexpr int64_t kAccumulators = 16;

}  // namespace
}  // namespace kiln::cpu::gemm

#include "attention_block.h"  // inside the target: it takes this instruction set

namespace kiln::cpu::gemm {

const AttentionFamily kAvx512Attention{"avx512", scratch_floats, attention_rows};

}  // namespace kiln::cpu::gemm

#pragma GCC pop_options
