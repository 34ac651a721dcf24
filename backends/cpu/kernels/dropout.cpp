// CPU kernel for dropout. Element i reads word i % 4 of Philox block (offset + i / 4), so
// the mask depends only on (seed, offset, i): chunks run in any order on any thread. The
// kernel runs Philox on 16 blocks at once in structure-of-arrays form, which the compiler
// vectorizes; it computes exactly Generator::philox.
#include "kiln/ops/dropout.h"

#include "kernels.h"
#include "kiln/generator.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

constexpr int kLanes = 16;

// words[4 l + w] = Generator::philox(key, first + l)[w] for l < kLanes: the words of 16
// consecutive blocks in element order. The loop over lanes (with the ten rounds unrolled
// inside) is what the compiler vectorizes.
void philox_lanes(uint64_t key, uint64_t first, uint32_t words[4 * kLanes]) {
  uint32_t k0[10], k1[10];
  k0[0] = static_cast<uint32_t>(key), k1[0] = static_cast<uint32_t>(key >> 32);
  for (int r = 1; r < 10; ++r) k0[r] = k0[r - 1] + 0x9E3779B9u, k1[r] = k1[r - 1] + 0xBB67AE85u;
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t counter = first + static_cast<uint64_t>(l);
    uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0,
             c3 = 0;
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0[r];
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1[r];
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      c0 = n0;
      c2 = n2;
    }
    words[4 * l] = c0;
    words[4 * l + 1] = c1;
    words[4 * l + 2] = c2;
    words[4 * l + 3] = c3;
  }
}

// out = x * (keep ? scale : 0) for one group of elements, like PyTorch's x * mask * scale
// (a dropped NaN stays NaN). Restrict pointers let the compiler vectorize it.
template <class T>
void apply_mask(const uint32_t* __restrict words, const T* __restrict in, T* __restrict out,
                bool* __restrict mask, int64_t count, float p, T scale) {
  for (int64_t e = 0; e < count; ++e) {
    const bool keep = Generator::to_unit_float(words[e]) >= p;
    mask[e] = keep;
    out[e] = in[e] * (keep ? scale : T(0));
  }
}

void dropout_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::DropoutAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]);
  const int64_t n = x.numel();
  const int64_t blocks = static_cast<int64_t>(ops::dropout_blocks(n));
  const int64_t groups = (blocks + kLanes - 1) / kLanes;
  visit_floating_dtype(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    T* out = nn::mdata<T>(c.outputs[0]);
    bool* mask = nn::mdata<bool>(c.outputs[1]);
    const float p = static_cast<float>(a.p);
    // p = 1 keeps nothing; its scale is never used (it would be inf).
    const T scale = a.p < 1 ? static_cast<T>(1.0 / (1.0 - a.p)) : T(0);
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / (4 * kLanes));
    parallel_for(0, groups, grain, [&](int64_t lo, int64_t hi) {
      uint32_t words[4 * kLanes];
      for (int64_t grp = lo; grp < hi; ++grp) {
        const int64_t e0 = grp * kLanes * 4, count = std::min<int64_t>(4 * kLanes, n - e0);
        philox_lanes(a.seed, a.offset + static_cast<uint64_t>(grp * kLanes), words);
        apply_mask<T>(words, xp + e0, out + e0, mask + e0, count, p, scale);
      }
    });
  });
}

}  // namespace

void register_dropout_kernels() {
  ops::dropout.kernels[static_cast<size_t>(DeviceType::CPU)] = dropout_kernel;
}

}  // namespace kiln::cpu::kernels
