// The AVX2 + FMA direct-convolution micro-kernels: MR pixels by NV ymm registers of output
// channels, 12 accumulators (16 ymm registers in all with the weights and a broadcast).
#include <immintrin.h>

#include "conv_microkernel.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

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
      _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(acc[i][v], _mm256_loadu_ps(dst)) : acc[i][v]);
    }
  }
}

void store(int64_t pixels, int64_t channels, const float* tile, int64_t width,
           const float* bias, float* dst, int64_t ld) {
  const __m256i down = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32(static_cast<int>(width)));
  int64_t i = 0;
  for (; i + 8 <= pixels; i += 8) {
    const float* column = tile + i * width;
    for (int64_t j = 0; j < channels; ++j) {
      __m256 v = _mm256_i32gather_ps(column + j, down, 4);
      if (bias) v = _mm256_add_ps(v, _mm256_set1_ps(bias[j]));
      _mm256_storeu_ps(dst + j * ld + i, v);
    }
  }
  for (; i < pixels; ++i)
    for (int64_t j = 0; j < channels; ++j)
      dst[j * ld + i] = tile[i * width + j] + (bias ? bias[j] : 0.0f);
}

}  // namespace

#pragma GCC pop_options

namespace {
const ConvMicroKernel k16{"avx2", 6, 16, tile<6, 2>, store, nullptr};
const ConvMicroKernel k8{"avx2", 12, 8, tile<12, 1>, store, nullptr};
}  // namespace

const ConvMicroKernel* const kAvx2ConvKernels[] = {&k16, &k8, nullptr};

}  // namespace kiln::cpu::gemm
