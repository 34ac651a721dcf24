// The AVX-512 micro-kernel: up to 12 rows by a 32-column panel (two zmm registers), 24
// accumulators held in registers across the whole depth. Per step of the depth it loads
// the panel's two vectors once and broadcasts each row's A value, so every FMA port stays
// busy while the loads stay below the load ports' rate.
#include <immintrin.h>

#include "microkernel.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,fma")

namespace kiln::cpu::gemm {

namespace {

constexpr int kRows = 12;
constexpr int kCols = 32;

template <int R>
void strip(int64_t depth, const float* a, const float* panel, float* c, int64_t ldc,
           int64_t cols, bool accumulate) {
  __m512 lo[R], hi[R];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) lo[i] = hi[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const __m512 b0 = _mm512_load_ps(panel + k * kCols);
    const __m512 b1 = _mm512_load_ps(panel + k * kCols + 16);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 ai = _mm512_set1_ps(a[k * kRows + i]);
      lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm512_fmadd_ps(ai, b1, hi[i]);
    }
  }
  const __mmask16 mask_lo = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 mask_hi = cols >= 32   ? __mmask16(0xFFFF)
                            : cols > 16 ? __mmask16((1u << (cols - 16)) - 1)
                                        : __mmask16(0);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      lo[i] = _mm512_add_ps(lo[i], _mm512_maskz_loadu_ps(mask_lo, row));
      hi[i] = _mm512_add_ps(hi[i], _mm512_maskz_loadu_ps(mask_hi, row + 16));
    }
    _mm512_mask_storeu_ps(row, mask_lo, lo[i]);
    _mm512_mask_storeu_ps(row + 16, mask_hi, hi[i]);
  }
}

void run(int64_t rows, int64_t depth, const float* a, const float* panel, float* c,
         int64_t ldc, int64_t cols, bool accumulate) {
  using Strip = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, bool);
  static constexpr Strip kByRows[kRows + 1] = {nullptr,   strip<1>,  strip<2>, strip<3>, strip<4>,
                                               strip<5>,  strip<6>,  strip<7>, strip<8>, strip<9>,
                                               strip<10>, strip<11>, strip<12>};
  kByRows[rows](depth, a, panel, c, ldc, cols, accumulate);
}

}  // namespace

#pragma GCC pop_options

namespace {
bool supported() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma");
}
}  // namespace

const MicroKernel kAvx512Kernel{"avx512", kRows, kCols, supported, run};

}  // namespace kiln::cpu::gemm
