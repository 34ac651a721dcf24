// The AVX2 + FMA micro-kernel: up to 6 rows by a 16-column panel (two ymm registers), 12
// accumulators, which with the panel's two vectors and one broadcast fill 15 of the 16
// registers (the classic Haswell blocking).
#include <immintrin.h>

#include "microkernel.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace kiln::cpu::gemm {

namespace {

constexpr int kRows = 6;
constexpr int kCols = 16;

// The lanes of an 8-wide store that fall inside the first `cols` columns.
__m256i lane_mask(int64_t cols) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols)), index);
}

template <int R>
void strip(int64_t depth, const float* a, const float* panel, float* c, int64_t ldc,
           int64_t cols, bool accumulate) {
  __m256 lo[R], hi[R];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const __m256 b0 = _mm256_load_ps(panel + k * kCols);
    const __m256 b1 = _mm256_load_ps(panel + k * kCols + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + k * kRows + i);
      lo[i] = _mm256_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm256_fmadd_ps(ai, b1, hi[i]);
    }
  }
  const __m256i mask_lo = lane_mask(cols), mask_hi = lane_mask(cols - 8);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      lo[i] = _mm256_add_ps(lo[i], _mm256_maskload_ps(row, mask_lo));
      hi[i] = _mm256_add_ps(hi[i], _mm256_maskload_ps(row + 8, mask_hi));
    }
    _mm256_maskstore_ps(row, mask_lo, lo[i]);
    _mm256_maskstore_ps(row + 8, mask_hi, hi[i]);
  }
}

void run(int64_t rows, int64_t depth, const float* a, const float* panel, float* c,
         int64_t ldc, int64_t cols, bool accumulate) {
  using Strip = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, bool);
  static constexpr Strip kByRows[kRows + 1] = {nullptr,  strip<1>, strip<2>, strip<3>,
                                               strip<4>, strip<5>, strip<6>};
  kByRows[rows](depth, a, panel, c, ldc, cols, accumulate);
}

}  // namespace

#pragma GCC pop_options

namespace {
bool supported() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
}  // namespace

const MicroKernel kAvx2Kernel{"avx2", kRows, kCols, supported, run, nullptr};

}  // namespace kiln::cpu::gemm
