// The AVX-512 plane of 2x2, stride-2 max pooling, row by row. Rows of small images are short (14
// outputs for a 28x28 input), shorter than the vector loops GCC emits, so its vectorized loop never
// ran and the scalar one cost a quarter of a BatchNormCNN batch; masked loads and stores
// cover any row length. Each block of 16 outputs loads its 32 input columns of both rows,
// splits them into even and odd columns, and keeps the running maximum in window order
// (first maximum wins ties, NaN wins), like pool.cpp's scalar loop.
#include <immintrin.h>

#include <algorithm>

#include "pool_simd.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq")

namespace kiln::cpu::kernels {

namespace {

__mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// The running maximum of 16 windows; kIndices: with their int64 positions.
template <bool kIndices>
struct Running {
  __m512 best;
  __m512i at_lo, at_hi;  // positions of lanes 0-7 and 8-15

  void see(__m512 v, __m512i pos_lo, __m512i pos_hi) {
    const __mmask16 take =
        _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    best = _mm512_mask_mov_ps(best, take, v);
    if constexpr (kIndices) {
      at_lo = _mm512_mask_mov_epi64(at_lo, __mmask8(take), pos_lo);
      at_hi = _mm512_mask_mov_epi64(at_hi, __mmask8(take >> 8), pos_hi);
    }
  }
};

template <bool kIndices>
void plane_rows(const float* plane, int64_t W, int64_t OH, int64_t OW, float* best, int64_t* at) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i step_lo = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i step_hi = _mm512_add_epi64(step_lo, _mm512_set1_epi64(16));
  auto shifted = [](__m512i p, int64_t d) { return _mm512_add_epi64(p, _mm512_set1_epi64(d)); };
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t top = 2 * oh * W;
    for (int64_t ow = 0; ow < OW; ow += 16) {
      const int64_t n = std::min<int64_t>(16, OW - ow), col = top + 2 * ow;
      const __mmask16 in_lo = first_lanes(2 * n), in_hi = first_lanes(2 * n - 16);
      auto split = [&](const float* p, __m512& left, __m512& right) {
        const __m512 a = _mm512_maskz_loadu_ps(in_lo, p);
        const __m512 b = _mm512_maskz_loadu_ps(in_hi, p + 16);
        left = _mm512_permutex2var_ps(a, even, b);
        right = _mm512_permutex2var_ps(a, odd, b);
      };
      __m512 tl, tr, bl, br;
      split(plane + col, tl, tr);
      split(plane + col + W, bl, br);
      __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
      if constexpr (kIndices) {
        lo = _mm512_add_epi64(_mm512_set1_epi64(col), step_lo);
        hi = _mm512_add_epi64(_mm512_set1_epi64(col), step_hi);
      }
      Running<kIndices> r{tl, lo, hi};
      r.see(tr, shifted(lo, 1), shifted(hi, 1));
      r.see(bl, shifted(lo, W), shifted(hi, W));
      r.see(br, shifted(lo, W + 1), shifted(hi, W + 1));
      const __mmask16 out = first_lanes(n);
      _mm512_mask_storeu_ps(best + oh * OW + ow, out, r.best);
      if constexpr (kIndices) {
        _mm512_mask_storeu_epi64(at + oh * OW + ow, __mmask8(out), r.at_lo);
        _mm512_mask_storeu_epi64(at + oh * OW + ow + 8, __mmask8(out >> 8), r.at_hi);
      }
    }
  }
}

void plane(const float* in, int64_t W, int64_t OH, int64_t OW, float* best, int64_t* at) {
  if (at)
    plane_rows<true>(in, W, OH, OW, best, at);
  else
    plane_rows<false>(in, W, OH, OW, best, at);
}

}  // namespace

#pragma GCC pop_options

MaxPool2x2Plane max_pool_2x2_plane_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return ok ? plane : nullptr;
}

}  // namespace kiln::cpu::kernels
