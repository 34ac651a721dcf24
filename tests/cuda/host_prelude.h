// The host versions of what the GPU prelude of kiln's generated kernels defines
// (backends/cuda/src/kernel_source.cpp): with it, a kernel's source compiles as C++ on the
// host and runs there one thread per block, a block's cooperation being its one thread's
// value. Tests use it to check kernels against the CPU kernels (cuda/generated_kernels.h),
// and the fake NVRTC (cuda/fake_driver) to run every kernel kiln launches on the fake driver.
#pragma once

namespace kiln::cuda {

// The host versions of what the GPU prelude defines (the kernels' own code is unchanged).
inline constexpr const char* kHostPrelude = R"(#define KILN_KERNEL_PRELUDE
#include <math.h>
#include <string.h>
#include "kiln/half.h"
#define KILN_DEVICE static inline
#define KILN_KERNEL extern "C"
#define KILN_FOR_EACH_ELEMENT(i, n) for (long long i = 0; i < (n); ++i)
#define KILN_BLOCK_INDEX 0
#define KILN_BLOCK_COUNT 1
#define KILN_THREAD_INDEX 0
#define KILN_THREAD_COUNT 1
#define KILN_COOPERATIVE_BLOCKS 0
#define __restrict__ __restrict
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __int_as_float(int b) { float f; memcpy(&f, &b, 4); return f; }
static inline float __uint_as_float(unsigned b) { float f; memcpy(&f, &b, 4); return f; }
static inline double __longlong_as_double(long long b) { double d; memcpy(&d, &b, 8); return d; }
static inline float kiln_load_f16(unsigned short h) { kiln::Half x; memcpy(&x, &h, 2); return x; }
static inline unsigned short kiln_store_f16(float f) { kiln::Half x(f); unsigned short h; memcpy(&h, &x, 2); return h; }
static inline float kiln_load_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
static inline unsigned short kiln_store_bf16(float f) { kiln::BFloat16 x(f); unsigned short h; memcpy(&h, &x, 2); return h; }
struct KilnDims { long long sizes[8]; long long strides[5][8]; };
struct KilnReduceDims { long long kept_sizes[8], kept_strides[8], reduced_sizes[8], reduced_strides[8]; };
template <class T> static inline void kiln_atomic_add(T* p, T v) { *p += v; }
static inline void kiln_atomic_add(unsigned char* p, unsigned char v) { if (v) *p = 1; }
static inline void kiln_atomic_min(long long* p, long long v) { if (v < *p) *p = v; }
)";

}  // namespace kiln::cuda
