// Packing B for the micro-kernel (gemm.h). Algorithm: K is cut into blocks of at most
// ~128 steps (a panel of one block, 128 x 32 floats = 16 KiB, stays in L1 beside the strip
// of A that passes over it; 256-step blocks measured 5-20% slower on the catalog's layer
// shapes; a K of up to 192 stays one block, which saves C a read-modify-write);
// each block's columns are cut into panels of the kernel's width, stored k-major, with the
// columns past N zero so the kernel never branches on a partial panel.
#include <algorithm>
#include <cstring>

#include "kiln/cpu/gemm/gemm.h"
#include "kiln/thread_pool.h"
#include "microkernel.h"

namespace kiln::cpu::gemm {

namespace {

constexpr int64_t kMaxSingleBlock = 192;
constexpr int64_t kBlockDepth = 128;

std::vector<int64_t> k_blocks_for(int64_t k) {
  const int64_t blocks = k <= kMaxSingleBlock ? 1 : (k + kBlockDepth - 1) / kBlockDepth;
  const int64_t depth = (k + blocks - 1) / blocks;
  std::vector<int64_t> starts;
  for (int64_t s = 0; s < k; s += depth) starts.push_back(s);
  starts.push_back(k);
  return starts;
}

}  // namespace

PackedB::PackedB(const float* data, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride,
                 const MicroKernel& kernel)
    : kernel_(&kernel), k_(k), n_(n), k_block_starts_(k_blocks_for(k)) {
  const int64_t nr = kernel.nr, panel_count = panels();
  storage_ = Tensor::empty({std::max<int64_t>(1, k * panel_count * nr)}, DType::Float32);
  // One task per (K block, panel): each fills its own depth x nr floats.
  const int64_t tasks = k_blocks() * panel_count;
  const int64_t floats_per_task = k_blocks() ? k / k_blocks() * nr : 0;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, floats_per_task));
  parallel_for(0, tasks, grain, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      const int64_t block = t / panel_count, p = t % panel_count;
      const int64_t k0 = k_block_starts_[block], depth = k_block_starts_[block + 1] - k0;
      const int64_t n0 = p * nr, cols = std::min<int64_t>(nr, n - n0);
      float* dst = const_cast<float*>(panel(block, p));
      if (col_stride == 1) {  // rows of B are contiguous: copy nr floats per step
        for (int64_t kk = 0; kk < depth; ++kk) {
          const float* src = data + (k0 + kk) * row_stride + n0;
          std::memcpy(dst + kk * nr, src, static_cast<size_t>(cols) * sizeof(float));
          std::fill(dst + kk * nr + cols, dst + (kk + 1) * nr, 0.0f);
        }
      } else {  // columns are (B is a transposed weight): read each column, scatter by nr
        if (cols < nr) std::fill(dst, dst + depth * nr, 0.0f);
        for (int64_t j = 0; j < cols; ++j) {
          const float* src = data + (n0 + j) * col_stride + k0 * row_stride;
          for (int64_t kk = 0; kk < depth; ++kk) dst[kk * nr + j] = src[kk * row_stride];
        }
      }
    }
  });
}

int64_t PackedB::panels() const { return kernel_ ? (n_ + kernel_->nr - 1) / kernel_->nr : 0; }

const float* PackedB::panel(int64_t block, int64_t p) const {
  const int64_t nr = kernel_->nr;
  const int64_t k0 = k_block_starts_[block], depth = k_block_starts_[block + 1] - k0;
  return static_cast<const float*>(storage_.raw_data()) + k0 * panels() * nr + p * depth * nr;
}

}  // namespace kiln::cpu::gemm
