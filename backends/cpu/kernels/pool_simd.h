// Vector planes of max pooling for the instruction sets that have them, chosen at run time
// by the CPU's features (pool.cpp falls back to its portable loops).
#pragma once

#include <cstdint>

namespace kiln::cpu::kernels {

// One plane of float32 2x2 windows with stride 2: best[oh * OW + ow], at[...] for oh < OH,
// ow < OW from a plane W wide (flat in-plane indices, as max_pool2d; a null `at` skips
// them, and the kernel does not compute them).
using MaxPool2x2Plane = void (*)(const float* plane, int64_t W, int64_t OH, int64_t OW, float* best,
                                 int64_t* at);

// The AVX-512 plane, or null when this CPU cannot run it.
MaxPool2x2Plane max_pool_2x2_plane_avx512();

}  // namespace kiln::cpu::kernels
