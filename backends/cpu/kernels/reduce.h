// The CPU reduction engine. Algorithm: split the input's dims into kept and reduced ones.
// Three shapes of work: (a) the reduced dims form the dense tail (rows: each output
// reduces one contiguous row, with independent lanes so the compiler vectorizes);
// (b) the reduced dims form one dense block, at the head or between kept dims (columns:
// outputs accumulate the block row by row, vectorized across the kept tail); (c) anything
// else walks the reduced dims per output.
// Outputs are split across the thread pool.
#pragma once

#include <algorithm>
#include <memory>

#include "kiln/op.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::kernels {

// A reduction: Acc init(); Acc step(Acc, T); Acc merge(Acc, Acc); Out done(Acc, count).
template <class T, class Out, class R>
void reduce(const Tensor& in, const Tensor& out, uint64_t mask, R r) {
  const int64_t rank = in.dim();
  Shape kept_sizes, kept_strides, red_sizes, red_strides;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = mask & (1ull << d);
    (reduced ? red_sizes : kept_sizes).push_back(in.sizes()[d]);
    (reduced ? red_strides : kept_strides).push_back(in.strides()[d]);
  }
  const int64_t n_out = numel(kept_sizes);
  const int64_t n_red = numel(red_sizes);
  const T* base = static_cast<const T*>(in.raw_data());
  Out* o = static_cast<Out*>(out.raw_data());  // output is contiguous in kept-dim order
  if (n_out == 0) return;
  if (n_red == 0) {
    for (int64_t i = 0; i < n_out; ++i) o[i] = r.done(r.init(), 0);
    return;
  }

  // Pattern (a): input contiguous and every reduced dim after every kept dim.
  bool contiguous = in.is_contiguous();
  int64_t last_kept = -1, first_red = rank;
  for (int64_t d = 0; d < rank; ++d) {
    if (in.sizes()[d] == 1) continue;
    if (mask & (1ull << d)) first_red = std::min(first_red, d);
    else last_kept = d;
  }
  if (contiguous && last_kept < first_red) {
    int64_t grain = std::max<int64_t>(1, kParallelGrain / n_red);
    parallel_for(0, n_out, grain, [&](int64_t b, int64_t e) {
      constexpr int L = 16;
      for (int64_t row = b; row < e; ++row) {
        const T* x = base + row * n_red;
        typename R::Acc lanes[L];
        for (int l = 0; l < L; ++l) lanes[l] = r.init();
        int64_t i = 0;
        for (; i + L <= n_red; i += L)
          for (int l = 0; l < L; ++l) lanes[l] = r.step(lanes[l], x[i + l]);
        typename R::Acc acc = r.init();
        for (; i < n_red; ++i) acc = r.step(acc, x[i]);
        for (int l = 0; l < L; ++l) acc = r.merge(acc, lanes[l]);
        o[row] = r.done(acc, n_red);
      }
    });
    return;
  }

  // Pattern (b): input contiguous and the reduced dims one block, [outer, n_red, inner]
  // (outer = 1: the reduced dims lead; a mean over a sequence's tokens has both).
  int64_t last_red = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (in.sizes()[d] != 1 && (mask & (1ull << d))) last_red = d;
  bool one_block = contiguous;
  int64_t inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (in.sizes()[d] == 1) continue;
    const bool reduced = mask & (1ull << d);
    if (d > first_red && d < last_red && !reduced) one_block = false;
    if (d > last_red) inner *= in.sizes()[d];
  }
  if (one_block) {
    int64_t grain = std::max<int64_t>(16, kParallelGrain / n_red);
    parallel_for(0, n_out, grain, [&](int64_t b, int64_t e) {
      // (Not a std::vector: vector<bool> has no data() for the logical reductions.)
      std::unique_ptr<typename R::Acc[]> acc(new typename R::Acc[static_cast<size_t>(e - b)]);
      std::fill(acc.get(), acc.get() + (e - b), r.init());
      // Outputs [b, e) are runs of one outer index each: columns [j0, j1) of its block.
      for (int64_t at = b; at < e;) {
        const int64_t outer = at / inner, j0 = at % inner, j1 = std::min(inner, j0 + e - at);
        const T* block = base + outer * n_red * inner;
        typename R::Acc* a = acc.get() + (at - b) - j0;
        for (int64_t i = 0; i < n_red; ++i) {
          const T* x = block + i * inner;
          for (int64_t j = j0; j < j1; ++j) a[j] = r.step(a[j], x[j]);
        }
        at += j1 - j0;
      }
      for (int64_t j = 0; j < e - b; ++j) o[b + j] = r.done(acc[j], n_red);
    });
    return;
  }

  // Pattern (c): general strides.
  int64_t grain = std::max<int64_t>(1, kParallelGrain / n_red);
  parallel_for(0, n_out, grain, [&](int64_t b, int64_t e) {
    Shape ridx(red_sizes.size(), 0);
    for (int64_t i = b; i < e; ++i) {
      int64_t off = 0, rem = i;
      for (size_t d = kept_sizes.size(); d-- > 0;) {
        off += (rem % kept_sizes[d]) * kept_strides[d];
        rem /= kept_sizes[d];
      }
      const T* x = base + off;
      typename R::Acc acc = r.init();
      std::fill(ridx.begin(), ridx.end(), 0);
      int64_t roff = 0;
      for (int64_t k = 0; k < n_red; ++k) {
        acc = r.step(acc, x[roff]);
        for (size_t d = red_sizes.size(); d-- > 0;) {
          if (++ridx[d] < red_sizes[d]) {
            roff += red_strides[d];
            break;
          }
          roff -= (red_sizes[d] - 1) * red_strides[d];
          ridx[d] = 0;
        }
      }
      o[i] = r.done(acc, n_red);
    }
  });
}

}  // namespace kiln::cpu::kernels
