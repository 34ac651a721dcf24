// The AVX2 + FMA direct-convolution micro-kernels: MR pixels by NV ymm registers of output
// channels, 12 accumulators (16 ymm registers in all with the weights and a broadcast),
// its tile store (an 8x8 register transpose) and the shallow orientation.
#include <immintrin.h>

#include "conv_microkernel.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

#include "transpose_8x8.h"  // inside the target: it takes AVX2

namespace kiln::cpu::gemm {

namespace {

template <int MR, int NV>
void tile(int64_t rows, const float* const* pixels, const int64_t* offsets, int64_t depth,
          const float* panel, float* c, int64_t ldc, bool accumulate) {
  constexpr int NR = 8 * NV;
  const float* px[MR];
  __m256 acc[MR][NV];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    px[i] = pixels[i];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < depth; ++k) {
    const int64_t off = offsets[k];
    __m256 w[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) w[v] = _mm256_loadu_ps(panel + k * NR + 8 * v);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(px[i] + off);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(a, w[v], acc[i][v]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* dst = c + i * ldc + 8 * v;
      _mm256_storeu_ps(dst,
                       accumulate ? _mm256_add_ps(acc[i][v], _mm256_loadu_ps(dst)) : acc[i][v]);
    }
  }
}

// v through channel c's bias, scale, shift and ReLU (ConvOutput).
__m256 finish(__m256 v, const ConvOutput& o, int64_t c) {
  if (o.bias) v = _mm256_add_ps(v, _mm256_set1_ps(o.bias[c]));
  if (o.scale) v = _mm256_mul_ps(v, _mm256_set1_ps(o.scale[c]));
  if (o.shift) v = _mm256_add_ps(v, _mm256_set1_ps(o.shift[c]));
  if (o.relu) v = _mm256_max_ps(v, _mm256_setzero_ps());  // NaN and -0 -> +0, as relu
  return v;
}

float finish(float v, const ConvOutput& o, int64_t c) {
  if (o.bias) v += o.bias[c];
  if (o.scale) v *= o.scale[c];
  if (o.shift) v += o.shift[c];
  if (o.relu) v = v > 0.0f ? v : 0.0f;
  return v;
}

// Tiles in blocks of 8 pixels x 8 channels through an 8x8 register transpose (gathers, the
// obvious alternative, are slow on AMD's cores).
void store(int64_t pixels, int64_t channels, const float* tile, int64_t width,
           const ConvOutput& output, float* dst, int64_t ld) {
  int64_t i = 0;
  for (; i + 8 <= pixels; i += 8)
    for (int64_t j = 0; j < channels; j += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(tile + (i + q) * width + j);
      transpose_8x8(r);
      const int64_t m = channels - j < 8 ? channels - j : 8;
      for (int64_t q = 0; q < m; ++q) {
        _mm256_storeu_ps(dst + (j + q) * ld + i, finish(r[q], output, j + q));
      }
    }
  for (; i < pixels; ++i)
    for (int64_t j = 0; j < channels; ++j) dst[j * ld + i] = finish(tile[i * width + j], output, j);
}

// The shallow orientation (conv_microkernel.h): eight output channels by two vectors of 8
// output columns, 16 accumulators. Columns past the row's end are masked out of the loads
// (vmaskmovps does not fault on them) and the row's tail is stored element by element
// (AVX2's masked stores are slow on AMD's cores).
void shallow(const float* plane, int64_t row_step, const int64_t* offsets, int64_t depth,
             const float* w, const ConvOutput& output, int64_t channels, float* out, int64_t OH,
             int64_t OW) {
  constexpr int kChannels = 8;
  for (int64_t oc0 = 0; oc0 < channels; oc0 += kChannels) {
    const int64_t m = channels - oc0 < kChannels ? channels - oc0 : kChannels;
    const float* wrow[kChannels];
    float b[kChannels];
#pragma GCC unroll 8
    for (int r = 0; r < kChannels; ++r) {
      const int64_t oc = oc0 + (r < m ? r : m - 1);
      wrow[r] = w + oc * depth;
      b[r] = output.bias ? output.bias[oc] : 0.0f;
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* row = plane + oh * row_step;
      for (int64_t ow = 0; ow < OW; ow += 16) {
        const int64_t n = OW - ow < 16 ? OW - ow : 16;
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane);
        const __m256i hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n) - 8), lane);
        __m256 acc[kChannels][2];
#pragma GCC unroll 8
        for (int r = 0; r < kChannels; ++r) acc[r][0] = acc[r][1] = _mm256_set1_ps(b[r]);
        for (int64_t k = 0; k < depth; ++k) {
          const float* src = row + ow + offsets[k];
          const __m256 x0 = _mm256_maskload_ps(src, lo);
          const __m256 x1 = _mm256_maskload_ps(src + 8, hi);
#pragma GCC unroll 8
          for (int r = 0; r < kChannels; ++r) {
            const __m256 wk = _mm256_broadcast_ss(wrow[r] + k);
            acc[r][0] = _mm256_fmadd_ps(x0, wk, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x1, wk, acc[r][1]);
          }
        }
        for (int r = 0; r < kChannels; ++r) {
          if (r >= m) break;
          float* dst = out + (oc0 + r) * OH * OW + oh * OW + ow;
          ConvOutput after = output.from(oc0 + r);  // the bias is already in
          after.bias = nullptr;
          const __m256 v0 = finish(acc[r][0], after, 0), v1 = finish(acc[r][1], after, 0);
          if (n == 16) {
            _mm256_storeu_ps(dst, v0);
            _mm256_storeu_ps(dst + 8, v1);
          } else {
            alignas(32) float tail[16];
            _mm256_store_ps(tail, v0);
            _mm256_store_ps(tail + 8, v1);
            for (int64_t q = 0; q < n; ++q) dst[q] = tail[q];
          }
        }
      }
    }
  }
}

}  // namespace

#pragma GCC pop_options

namespace {
const ConvMicroKernel k16{"avx2", 6, 16, tile<6, 2>, store, shallow};
const ConvMicroKernel k8{"avx2", 12, 8, tile<12, 1>, store, shallow};
}  // namespace

const ConvMicroKernel* const kAvx2ConvKernels[] = {&k16, &k8, nullptr};

}  // namespace kiln::cpu::gemm
