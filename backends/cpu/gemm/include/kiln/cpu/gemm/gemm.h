// kiln's own float32 GEMM: C = A · B with B packed into column panels, so that a weight
// packed once serves every call (a frozen graph, an exported model, or a parameter whose
// storage version has not changed), and with an epilogue hook that runs on each block of
// rows of C as soon as it is complete, while it is still in cache. The micro-kernel is
// chosen by the CPU's features at run time (AVX-512, AVX2 + FMA, or portable C++), never by
// what the build machine had.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::cpu::gemm {

struct MicroKernel;  // microkernel.h: one instruction set's register-blocked inner product

// The micro-kernels this CPU can run, best first; names "avx512", "avx2", "generic".
std::vector<const MicroKernel*> available_kernels();
// The one packing and products use unless told otherwise: KILN_GEMM_KERNEL=NAME picks one
// of available_kernels() (an unknown or unavailable name is an error naming the choices).
const MicroKernel& default_kernel();
// The available kernel called `name`; an error naming `where` (the setting that asked for
// it) and the choices when this CPU has no such kernel.
const MicroKernel& kernel_named(std::string_view name, std::string_view where);
const char* kernel_name(const MicroKernel& kernel);

// B (K x N, element (k, n) at data[k * row_stride + n * col_stride]) in the layout the
// micro-kernel reads: K cut into blocks that stay in cache, each block's columns cut into
// panels of the kernel's width, zero-padded, each panel k-major.
class PackedB {
 public:
  PackedB() = default;
  PackedB(const float* data, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride,
          const MicroKernel& kernel = default_kernel());

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  const MicroKernel& kernel() const { return *kernel_; }
  int64_t panels() const;
  int64_t k_blocks() const { return static_cast<int64_t>(k_block_starts_.size()) - 1; }
  int64_t k_block_start(int64_t block) const { return k_block_starts_[block]; }
  // The packed panel `panel` of K block `block`: (block's depth) x kernel width floats.
  const float* panel(int64_t block, int64_t panel) const;

 private:
  const MicroKernel* kernel_ = nullptr;
  int64_t k_ = 0, n_ = 0;
  std::vector<int64_t> k_block_starts_;  // K block b spans [starts[b], starts[b + 1])
  Tensor storage_;                       // from the caching allocator: no fresh pages per call
};

// Called with [row_begin, row_end) once those rows of C hold their final values; calls for
// disjoint ranges may run concurrently on different threads.
using RowEpilogue = std::function<void(int64_t row_begin, int64_t row_end)>;

// C[m x n] = A[m x k] · B, A row-major with leading dim lda, C row-major with leading dim
// ldc, split across kiln's threads. `epilogue`, when given, is called on every row of C
// exactly once after that row is final.
void sgemm(int64_t m, const float* a, int64_t lda, const PackedB& b, float* c, int64_t ldc,
           const RowEpilogue& epilogue = nullptr);

}  // namespace kiln::cpu::gemm
