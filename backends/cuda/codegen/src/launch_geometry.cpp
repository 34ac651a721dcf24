// How a kernel of a PtxModule is launched (see ptx.h). Plain arithmetic, tested without a GPU.
#include <algorithm>
#include <cstdint>
#include <span>

#include "kiln/cuda/codegen/ptx.h"
#include "kiln/error.h"

namespace kiln::cuda::codegen {
namespace {

// Enough resident blocks to hide memory latency: an H100/H200 SM holds 2048 threads, eight
// 256-thread blocks. More blocks than this only add scheduling; the grid-stride loops cover
// any size with these.
constexpr int64_t kBlocksPerMultiprocessor = 8;
constexpr int64_t kElementwiseBlock = 256;
constexpr int64_t kWarp = 32;
constexpr int64_t kMaxBlock = 1024;

}  // namespace

LaunchGeometry launch_geometry(const PtxKernel& kernel, std::span<const int64_t> dims,
                               int multiprocessors) {
  KILN_CHECK(dims.size() == kernel.dims, "[cuda codegen] kernel '", kernel.name, "': expected ",
             kernel.dims, " iteration dims to launch it over, found ", dims.size(),
             ". Fix: pass every dim of its spec (static ones too).");
  KILN_CHECK(multiprocessors > 0, "[cuda codegen] kernel '", kernel.name,
             "': expected the GPU's multiprocessor count, found ", multiprocessors,
             ". Fix: pass DeviceProperties::multiprocessor_count.");
  for (int64_t d : dims)
    KILN_CHECK(d >= 0, "[cuda codegen] kernel '", kernel.name,
               "': expected every iteration dim known and non-negative, found ", d,
               ". Fix: pass the run-time size of each dim.");
  const int64_t most_blocks = kBlocksPerMultiprocessor * multiprocessors;
  LaunchGeometry g;
  if (kernel.kind == KernelKind::Elementwise) {
    int64_t elements = 1;
    for (int64_t d : dims) elements *= d;
    g.block = kElementwiseBlock;
    g.grid = std::clamp<int64_t>((elements + g.block - 1) / g.block, 1, most_blocks);
    return g;
  }
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
  const int64_t row = dims.empty() ? 1 : dims.back();
  g.block = std::clamp<int64_t>((row + kWarp - 1) / kWarp * kWarp, kWarp, kMaxBlock);
  g.grid = std::clamp<int64_t>(rows, 1, most_blocks);
  return g;
}

}  // namespace kiln::cuda::codegen
