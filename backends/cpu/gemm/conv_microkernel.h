// The direct-convolution micro-kernel interface: one instruction set's register-blocked
// product of up to `mr` output pixels by one packed panel of `nr` output channels. The
// input is never copied into im2col columns: every pixel has a pointer to its window's
// first input element and every step of the depth (input channel, kernel row, kernel
// column) one offset from it, the same for all pixels, so each step loads the panel's
// row of weights once and broadcasts one input value per pixel.
#pragma once

#include <cstdint>

#include "kiln/cpu/gemm/conv2d.h"

namespace kiln::cpu::gemm {

struct ConvMicroKernel {
  const char* isa;  // the GEMM micro-kernel family it belongs to: "avx512", "avx2"
  int mr;           // output pixels per call, at most
  int nr;           // output channels of a packed panel
  // c[i * ldc + j] (+)= sum_k pixels[i][offsets[k]] * panel[k * nr + j] for i < rows
  // (<= mr), j < nr; `accumulate`: add to c. All mr entries of `pixels` must be readable (the
  // caller repeats its last pixel in a short strip); only the first `rows` rows of c are
  // stored.
  void (*run)(int64_t rows, const float* const* pixels, const int64_t* offsets, int64_t depth,
              const float* panel, float* c, int64_t ldc, bool accumulate);
  // The transposed write of a [pixels x width] tile into NCHW rows through `output`:
  // dst[j * ld + i] = output(tile[i * width + j]) for channel j, i < pixels, j < channels.
  // A register transpose: the scalar loop cost half as much as the products.
  void (*store)(int64_t pixels, int64_t channels, const float* tile, int64_t width,
                const ConvOutput& output, float* dst, int64_t ld);
  // For shallow depths (a first layer's few input channels) with a column stride of 1, the
  // other orientation: vectors along output rows, broadcasting the weights, stored straight
  // into NCHW rows (the tile's transpose would cost more than the products). Computes
  // out[oc * OH * OW + oh * OW + ow] for oc < channels, oh < OH, ow < OW from the padded
  // plane (output row oh starting at plane + oh * row_step) and w[oc * depth + k], through
  // `output`. Null: the family has none.
  void (*shallow)(const float* plane, int64_t row_step, const int64_t* offsets, int64_t depth,
                  const float* w, const ConvOutput& output, int64_t channels, float* out,
                  int64_t OH, int64_t OW);
};

// The depth up to which `shallow` runs instead of `run` (bench_gemm's conv rows).
constexpr int64_t kShallowDepth = 32;
// The bytes of a panel's depth block: the driver cuts the depth so that the weights one
// strip reads stay in L1 across the strips of a pixel block.
constexpr int64_t kPanelBlockBytes = 32 * 1024;

// Each family's kernels, widest panel first; null-terminated.
extern const ConvMicroKernel* const kAvx512ConvKernels[];
extern const ConvMicroKernel* const kAvx2ConvKernels[];

}  // namespace kiln::cpu::gemm
