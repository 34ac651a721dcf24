// The micro-kernel interface: one instruction set's register-blocked product of a strip of
// at most `mr` rows of A by one packed panel of B (`nr` columns). Each instruction set lives
// in its own file whose functions carry that set as a target attribute, so the rest of kiln
// is compiled for the baseline CPU and the kernel is picked at run time.
#pragma once

#include <cstdint>

namespace kiln::cpu::gemm {

struct MicroKernel {
  const char* name;
  int mr;  // rows of A per call, at most
  int nr;  // columns of a packed panel
  bool (*supported)();  // whether this CPU (and OS) can run it
  // C[rows x nr] (+)= A[rows x depth] · panel[depth x nr], rows <= mr. A is a packed strip,
  // k-major with a stride of mr (element (i, k) at a[k * mr + i]), so the kernel reads it
  // as one stream whatever A's leading dim (rows of A 4 KiB apart would all fall in one L1
  // set); the panel is k-major and 64-byte aligned. Only the first `cols` columns of C
  // are stored. `accumulate`: add to C instead of overwriting it.
  void (*run)(int64_t rows, int64_t depth, const float* a, const float* panel, float* c,
              int64_t ldc, int64_t cols, bool accumulate);
  // Packs one strip for `run`: rows (<= mr) of A from `a` (leading dim lda), `depth` values
  // each, into out[k * mr + i]. Null: the portable scalar loop (pack_strip in sgemm.cpp).
  void (*pack)(int64_t rows, int64_t depth, const float* a, int64_t lda, float* out);
};

extern const MicroKernel kAvx512Kernel;
extern const MicroKernel kAvx2Kernel;
extern const MicroKernel kGenericKernel;

}  // namespace kiln::cpu::gemm
