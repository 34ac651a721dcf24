// The GEMM driver (gemm.h). Algorithm: the rows of C are cut into blocks small enough that
// a block of C (rows x N) stays in L2; within a block, for each K block, each packed panel
// of B is run against every strip of the block's rows, so the panel is read from L1 while
// A's strips come from L2. When a block's last K block is done its rows are final and the
// epilogue runs on them at once, still in cache. Threads take contiguous ranges of strips
// (their own rows of C: the epilogue runs inside the same task); when there are too few
// rows for that (a batch-1 or batch-8 layer), they take ranges of panels instead and the
// epilogue runs afterwards over rows.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/cpu/gemm/gemm.h"
#include "kiln/error.h"
#include "kiln/thread_pool.h"
#include "microkernel.h"

namespace kiln::cpu::gemm {

namespace {

// Bytes of C one row block may hold: well inside every L2 kiln runs on (1-2 MiB).
constexpr int64_t kRowBlockBytes = 512 * 1024;
// Rows of A packed at once: 256 rows x a K block of up to 192 is at most 192 KiB, in L2.
constexpr int64_t kMaxBlockRows = 256;
// Multiply-adds below which one thread does the whole product.
constexpr int64_t kParallelWork = int64_t{1} << 16;

const MicroKernel* const kAllKernels[] = {&kAvx512Kernel, &kAvx2Kernel, &kGenericKernel};

const MicroKernel& choose_default_kernel() {
  const char* wanted = std::getenv("KILN_GEMM_KERNEL");
  if (!wanted || !*wanted) return *available_kernels().front();
  return kernel_named(wanted, "KILN_GEMM_KERNEL");
}

void pack_strip(int64_t rows, int64_t depth, const float* a, int64_t lda, int64_t mr, float* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t kk = 0; kk < depth; ++kk) out[kk * mr + i] = a[i * lda + kk];
}

// Rows [r0, r1) of A, depth [k0, k0 + depth), as strips of kernel.mr rows, each k-major
// (microkernel.h); the rows past r1 in the last strip are left as they are (never stored).
void pack_a(const MicroKernel& kernel, const float* a, int64_t lda, int64_t r0, int64_t r1,
            int64_t k0, int64_t depth, float* out) {
  const int64_t mr = kernel.mr;
  for (int64_t s = r0; s < r1; s += mr) {
    const int64_t rows = std::min(mr, r1 - s);
    const float* src = a + s * lda + k0;
    if (kernel.pack)
      kernel.pack(rows, depth, src, lda, out);
    else
      pack_strip(rows, depth, src, lda, mr, out);
    out += depth * mr;
  }
}

// Rows [r0, r1) of C by panels [p0, p1) of B; `epilogue` (may be null) runs on each row
// block once it is final.
void run_range(int64_t r0, int64_t r1, int64_t p0, int64_t p1, const float* a, int64_t lda,
               const PackedB& b, float* c, int64_t ldc, const RowEpilogue* epilogue) {
  const MicroKernel& kernel = b.kernel();
  const int64_t mr = kernel.mr, nr = kernel.nr, n = b.n();
  const int64_t width = (p1 - p0) * nr;
  int64_t block_rows = kRowBlockBytes / std::max<int64_t>(1, width * int64_t{sizeof(float)});
  block_rows = std::max<int64_t>(mr, std::min(block_rows, kMaxBlockRows) / mr * mr);
  // The packed block of A: whole strips of the block's rows by the deepest K block (the
  // first). One per thread, kept between calls.
  thread_local std::vector<float> a_block;
  const int64_t strips = (std::min(block_rows, r1 - r0) + mr - 1) / mr;
  const int64_t max_depth = b.k_block_start(1) - b.k_block_start(0);
  a_block.resize(static_cast<size_t>(strips * mr * max_depth));
  for (int64_t ib = r0; ib < r1; ib += block_rows) {
    const int64_t ie = std::min(r1, ib + block_rows);
    for (int64_t kb = 0; kb < b.k_blocks(); ++kb) {
      const int64_t k0 = b.k_block_start(kb), depth = b.k_block_start(kb + 1) - k0;
      pack_a(kernel, a, lda, ib, ie, k0, depth, a_block.data());
      for (int64_t p = p0; p < p1; ++p) {
        const float* panel = b.panel(kb, p);
        const int64_t cols = std::min(nr, n - p * nr);
        for (int64_t i = ib; i < ie; i += mr)
          kernel.run(std::min(mr, ie - i), depth, a_block.data() + (i - ib) * depth, panel,
                     c + i * ldc + p * nr, ldc, cols, kb > 0);
      }
    }
    if (epilogue) (*epilogue)(ib, ie);
  }
}

}  // namespace

std::vector<const MicroKernel*> available_kernels() {
  std::vector<const MicroKernel*> usable;
  for (const MicroKernel* k : kAllKernels)
    if (k->supported()) usable.push_back(k);
  return usable;
}

const MicroKernel& kernel_named(std::string_view name, std::string_view where) {
  std::string names;
  for (const MicroKernel* k : available_kernels()) {
    if (name == k->name) return *k;
    names += names.empty() ? k->name : std::string(", ") + k->name;
  }
  KILN_FAIL("[gemm] ", where, "=", name, " is not a micro-kernel this CPU can run. ",
            "Expected one of: ", names, ". Fix: set ", where, " to one of those, or unset it.");
}

const MicroKernel& default_kernel() {
  static const MicroKernel& kernel = choose_default_kernel();
  return kernel;
}

const char* kernel_name(const MicroKernel& kernel) { return kernel.name; }

void sgemm(int64_t m, const float* a, int64_t lda, const PackedB& b, float* c, int64_t ldc,
           const RowEpilogue& epilogue) {
  const int64_t n = b.n(), k = b.k();
  if (m <= 0 || n <= 0) return;
  const RowEpilogue* after = epilogue ? &epilogue : nullptr;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    if (after) (*after)(0, m);
    return;
  }
  const MicroKernel& kernel = b.kernel();
  const int64_t threads = num_threads(), panels = b.panels();
  const int64_t strips = (m + kernel.mr - 1) / kernel.mr;
  if (threads == 1 || m * n * k < kParallelWork) {
    run_range(0, m, 0, panels, a, lda, b, c, ldc, after);
    return;
  }
  if (strips >= 4 * threads || panels < threads) {
    // Each thread owns whole rows of C, epilogue included.
    parallel_for(0, strips, 1, [&](int64_t s0, int64_t s1) {
      run_range(s0 * kernel.mr, std::min(m, s1 * kernel.mr), 0, panels, a, lda, b, c, ldc, after);
    });
    return;
  }
  parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    run_range(0, m, p0, p1, a, lda, b, c, ldc, nullptr);
  });
  if (after) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1));
    parallel_for(0, m, grain, [&](int64_t r0, int64_t r1) { (*after)(r0, r1); });
  }
}

}  // namespace kiln::cpu::gemm
