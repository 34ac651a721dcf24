// An 8x8 float transpose in ymm registers, shared by the AVX-512 GEMM's A packing and the
// AVX2 convolution's tile store. Include it inside a file's target pragma (AVX or newer):
// it takes that file's instruction set. Internal linkage on purpose: an inline function
// with external linkage would be merged across the two files at link time, and the AVX2
// file could end up calling the AVX-512 file's copy.
#pragma once

#include <immintrin.h>

namespace kiln::cpu::gemm {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction set, see above

// r[i] (8 floats) becomes column i: three rounds of shuffles (24 in all).
inline void transpose_8x8(__m256 r[8]) {
  __m256 t[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 u[8];
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  // u[0..3] hold columns {0,4}, {1,5}, {2,6}, {3,7} of rows 0-3, u[4..7] of rows 4-7.
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
    r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
  }
}

}  // namespace
}  // namespace kiln::cpu::gemm
