// The portable micro-kernel: 4 rows by an 8-column panel in plain C++, for CPUs without
// AVX2 (and as the reference the vector kernels are tested against). The compiler
// vectorizes the inner loop for whatever the baseline target is.
#include "microkernel.h"

namespace kiln::cpu::gemm {

namespace {

constexpr int kRows = 4;
constexpr int kCols = 8;

void run(int64_t rows, int64_t depth, const float* a, const float* panel, float* c,
         int64_t ldc, int64_t cols, bool accumulate) {
  float acc[kRows][kCols] = {};
  for (int64_t k = 0; k < depth; ++k)
    for (int64_t i = 0; i < rows; ++i) {
      const float ai = a[k * kRows + i];
      for (int j = 0; j < kCols; ++j) acc[i][j] += ai * panel[k * kCols + j];
    }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols && j < kCols; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

bool supported() { return true; }

}  // namespace

const MicroKernel kGenericKernel{"generic", kRows, kCols, supported, run, nullptr};

}  // namespace kiln::cpu::gemm
