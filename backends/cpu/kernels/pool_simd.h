// Vector rows of max pooling for the instruction sets that have them, chosen at run time
// by the CPU's features (pool.cpp falls back to its portable loops).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// One output row of float32 2x2 windows with stride 2: best[ow], at[ow] for ow < OW from
// input rows ih0 and ih0 + 1 of a plane W wide (flat in-plane indices, as max_pool2d; a
// null `at` skips them).
using MaxPool2x2Row = void (*)(const float* plane, int64_t W, int64_t ih0, int64_t OW, float* best,
                               int64_t* at);

// The AVX-512 row, or null when this CPU cannot run it.
MaxPool2x2Row max_pool_2x2_row_avx512();

}  // namespace kiln::cpu
