// The AVX-512 direct-convolution micro-kernels: MR pixels by NV zmm registers of output
// channels, MR x NV accumulators held in registers across the whole depth (24 or 16, enough
// to cover the FMA latency on two ports). Per depth step: NV weight loads, MR broadcasts,
// MR x NV FMAs.
#include <immintrin.h>

#include "conv_microkernel.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,fma")

namespace kiln::cpu::gemm {

namespace {

template <int MR, int NV>
void tile(int64_t rows, const float* const* pixels, const int64_t* offsets, int64_t depth,
          const float* panel, float* c, int64_t ldc, bool accumulate) {
  constexpr int NR = 16 * NV;
  const float* px[MR];
  __m512 acc[MR][NV];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    px[i] = pixels[i];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < depth; ++k) {
    const int64_t off = offsets[k];
    __m512 w[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_ps(panel + k * NR + 16 * v);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(px[i][off]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(a, w[v], acc[i][v]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = c + i * ldc + 16 * v;
      _mm512_storeu_ps(dst,
                       accumulate ? _mm512_add_ps(acc[i][v], _mm512_loadu_ps(dst)) : acc[i][v]);
    }
  }
}

// r[i] (16 floats) becomes column i: 16x16 transposed in four rounds of shuffles (64 in
// all, a quarter of a cycle per element, against a 16-lane gather per channel).
void transpose_16x16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] =
        _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(
        _mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(
        _mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // r[4q + m] now holds, in each 128-bit lane L, column 4L + m of rows 4q..4q+3.
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512 a = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88);  // lanes 0,2 | 0,2
    const __m512 b = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);  // lanes 1,3 | 1,3
    const __m512 c = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88);
    const __m512 d = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
    t[m] = _mm512_shuffle_f32x4(a, c, 0x88);       // column m
    t[8 + m] = _mm512_shuffle_f32x4(a, c, 0xDD);   // column 8 + m
    t[4 + m] = _mm512_shuffle_f32x4(b, d, 0x88);   // column 4 + m
    t[12 + m] = _mm512_shuffle_f32x4(b, d, 0xDD);  // column 12 + m
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// v through channel c's bias, scale, shift and ReLU (ConvOutput).
__m512 finish(__m512 v, const ConvOutput& o, int64_t c) {
  if (o.bias) v = _mm512_add_ps(v, _mm512_set1_ps(o.bias[c]));
  if (o.scale) v = _mm512_mul_ps(v, _mm512_set1_ps(o.scale[c]));
  if (o.shift) v = _mm512_add_ps(v, _mm512_set1_ps(o.shift[c]));
  if (o.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());  // NaN and -0 -> +0, as relu
  return v;
}

void store(int64_t pixels, int64_t channels, const float* tile, int64_t width,
           const ConvOutput& output, float* dst, int64_t ld) {
  for (int64_t i = 0; i < pixels; i += 16) {
    const int64_t n = pixels - i < 16 ? pixels - i : 16;
    const __mmask16 lanes = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    for (int64_t j = 0; j < channels; j += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q)
        r[q] = q < n ? _mm512_loadu_ps(tile + (i + q) * width + j) : _mm512_setzero_ps();
      transpose_16x16(r);
      const int64_t m = channels - j < 16 ? channels - j : 16;
      for (int64_t q = 0; q < m; ++q) {
        _mm512_mask_storeu_ps(dst + (j + q) * ld + i, lanes, finish(r[q], output, j + q));
      }
    }
  }
}

// Eight output channels by two vectors of 16 output columns: 16 accumulators; per depth
// step two masked input loads, eight weight broadcasts, 16 FMAs.
void shallow(const float* plane, int64_t row_step, const int64_t* offsets, int64_t depth,
             const float* w, const ConvOutput& output, int64_t channels, float* out, int64_t OH,
             int64_t OW) {
  constexpr int kChannels = 8;
  for (int64_t oc0 = 0; oc0 < channels; oc0 += kChannels) {
    const int64_t m = channels - oc0 < kChannels ? channels - oc0 : kChannels;
    const float* wrow[kChannels];
    __m512 b[kChannels];
#pragma GCC unroll 8
    for (int r = 0; r < kChannels; ++r) {
      const int64_t oc = oc0 + (r < m ? r : m - 1);
      wrow[r] = w + oc * depth;
      b[r] = _mm512_set1_ps(output.bias ? output.bias[oc] : 0.0f);
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* row = plane + oh * row_step;
      for (int64_t ow = 0; ow < OW; ow += 32) {
        const int64_t n = OW - ow;
        const __mmask16 lo = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
        const __mmask16 hi = n >= 32  ? __mmask16(0xFFFF)
                             : n > 16 ? __mmask16((1u << (n - 16)) - 1)
                                      : __mmask16(0);
        __m512 acc[kChannels][2];
#pragma GCC unroll 8
        for (int r = 0; r < kChannels; ++r) acc[r][0] = acc[r][1] = b[r];
        for (int64_t k = 0; k < depth; ++k) {
          const float* src = row + ow + offsets[k];
          const __m512 x0 = _mm512_maskz_loadu_ps(lo, src);
          const __m512 x1 = _mm512_maskz_loadu_ps(hi, src + 16);
#pragma GCC unroll 8
          for (int r = 0; r < kChannels; ++r) {
            const __m512 wk = _mm512_set1_ps(wrow[r][k]);
            acc[r][0] = _mm512_fmadd_ps(x0, wk, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(x1, wk, acc[r][1]);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < kChannels; ++r) {
          if (r >= m) break;
          float* dst = out + (oc0 + r) * OH * OW + oh * OW + ow;
          ConvOutput after = output.from(oc0 + r);  // the bias is already in
          after.bias = nullptr;
          _mm512_mask_storeu_ps(dst, lo, finish(acc[r][0], after, 0));
          _mm512_mask_storeu_ps(dst + 16, hi, finish(acc[r][1], after, 0));
        }
      }
    }
  }
}

}  // namespace

#pragma GCC pop_options

namespace {
const ConvMicroKernel k64{"avx512", 6, 64, tile<6, 4>, store, shallow};
const ConvMicroKernel k32{"avx512", 8, 32, tile<8, 2>, store, shallow};
const ConvMicroKernel k16{"avx512", 12, 16, tile<12, 1>, store, shallow};
}  // namespace

const ConvMicroKernel* const kAvx512ConvKernels[] = {&k64, &k32, &k16, nullptr};

}  // namespace kiln::cpu::gemm
