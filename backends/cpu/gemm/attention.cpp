// The fused attention's driver: picks the instruction set, cuts each slice's queries into
// blocks and spreads the (slice, block) pairs over kiln's threads; each thread reuses one
// scratch buffer for all its blocks.
#include "kiln/cpu/gemm/attention.h"

#include <algorithm>
#include <vector>

#include "attention_family.h"
#include "kiln/cpu/gemm/gemm.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::gemm {

namespace {

const AttentionFamily& family_for(std::string_view isa) {
  // kernel_named checks that this CPU runs the family (an error naming the choices if not).
  isa = kernel_name(isa.empty() ? default_kernel() : kernel_named(isa, "gemm::attention"));
  if (isa == "avx512") return kAvx512Attention;
  if (isa == "avx2") return kAvx2Attention;
  return kGenericAttention;
}

}  // namespace

void attention(const AttentionArgs& a, std::string_view isa) {
  if (a.batch == 0 || a.queries == 0) return;
  const AttentionFamily& family = family_for(isa);
  const int64_t blocks = (a.queries + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
  const int64_t rows = (a.queries + blocks - 1) / blocks;  // equal blocks
  // About 32k multiply-adds per task at least, so that small problems stay on one thread.
  const int64_t work = std::max<int64_t>(1, rows * a.keys * (a.depth + a.value_depth));
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / work);
  const int64_t scratch = family.scratch_floats(a, rows);
  parallel_for(0, a.batch * blocks, grain, [&](int64_t lo, int64_t hi) {
    thread_local std::vector<float> buffer;
    if (static_cast<int64_t>(buffer.size()) < scratch) buffer.resize(scratch);
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t b = t / blocks, i0 = t % blocks * rows;
      family.rows(a, b, i0, std::min(a.queries, i0 + rows), buffer.data());
    }
  });
}

}  // namespace kiln::cpu::gemm
