// CPU kernels for sort, topk and searchsorted. Each line's positions are ordered by (value, position) under
// the total order of kiln/ops/sort.h: sort takes std::sort over the whole line, topk
// std::partial_sort over its first k (O(n log k)). The position breaks ties, so both give
// exactly what a stable sort gives, and what the GPU's bitonic sort gives. searchsorted
// binary-searches each value in its sorted line under the same order.
#include "kiln/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels.h"
#include "lines.h"
#include "loops.h"

namespace kiln::cpu::kernels {

namespace {

// Whether value a ranks below value b: NaN ranks above every number.
template <class T>
bool ranks_below(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// Orders a line: sorts `order` (positions 0..n-1) so the first `k` are the line's first k
// in (descending ? falling : rising) order, ties by position.
template <class T>
void order_line(const T* line, int64_t step, std::vector<int64_t>& order, int64_t k, bool descending) {
  std::iota(order.begin(), order.end(), int64_t{0});
  auto before = [&](int64_t i, int64_t j) {
    const T a = line[i * step], b = line[j * step];
    if (descending ? ranks_below(b, a) : ranks_below(a, b)) return true;
    if (descending ? ranks_below(a, b) : ranks_below(b, a)) return false;
    return i < j;
  };
  if (k == static_cast<int64_t>(order.size()))
    std::sort(order.begin(), order.end(), before);
  else
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
}

// Writes each line's first `k` in order to values and indices (outputs 0 and 1).
void ordered_lines(KernelCall& c, int64_t dim, int64_t k, bool descending) {
  const Tensor &x = c.inputs[0], &values = c.outputs[0], &indices = c.outputs[1];
  if (values.numel() == 0) return;
  const int64_t d = wrap_dim(dim, x.dim(), c.op.name.c_str());
  const Lines in_lines(x, d), out_lines(values, d);
  visit_compute_dtype(x.dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = elements_of<const T>(x);
    T* vp = elements_of<T>(values);
    int64_t* ip = elements_of<int64_t>(indices);
    const int64_t n = in_lines.length;
    parallel_for(0, in_lines.count, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n)),
                 [&](int64_t b, int64_t e) {
                   std::vector<int64_t> order(static_cast<size_t>(n));
                   for (int64_t line = b; line < e; ++line) {
                     const T* in = xp + in_lines.start(line);
                     order_line(in, in_lines.step, order, k, descending);
                     const int64_t at = out_lines.start(line);
                     for (int64_t i = 0; i < k; ++i) {
                       vp[at + i * out_lines.step] = in[order[i] * in_lines.step];
                       ip[at + i * out_lines.step] = order[i];
                     }
                   }
                 });
  });
}

void sort_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SortAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  ordered_lines(c, a.dim, x.dim() > 0 ? x.size(wrap_dim(a.dim, x.dim(), "sort")) : 1, a.descending);
}

void topk_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::TopkAttrs&>(c.attrs);
  ordered_lines(c, a.dim, a.k, a.largest);
}

// Every value's place in its line of the sorted sequence, by binary search: the first
// position whose element does not rank below the value (left), or ranks above it (right).
void searchsorted_kernel(KernelCall& c) {
  const Tensor &sorted = c.inputs[0], &values = c.inputs[1], &out = c.outputs[0];
  if (out.numel() == 0) return;
  const bool right = static_cast<const ops::SearchSortedAttrs&>(c.attrs).right;
  const Lines seq_lines(sorted, sorted.dim() - 1), value_lines(values, values.dim() - 1);
  const bool shared = sorted.dim() == 1;  // one line for every value
  const int64_t n = value_lines.length, m = seq_lines.length;
  int64_t* op = elements_of<int64_t>(out);  // contiguous, shaped like values
  visit_compute_dtype(sorted.dtype(), "searchsorted", [&](auto tag) {
    using T = decltype(tag);
    const T* sp = elements_of<const T>(sorted);
    const T* vp = elements_of<const T>(values);
    parallel_for(0, value_lines.count, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t line = b; line < e; ++line) {
                     const T* seq = sp + seq_lines.start(shared ? 0 : line);
                     const T* in = vp + value_lines.start(line);
                     for (int64_t i = 0; i < n; ++i) {
                       const T v = in[i * value_lines.step];
                       int64_t lo = 0, hi = m;
                       while (lo < hi) {
                         const int64_t mid = lo + (hi - lo) / 2;
                         const T s = seq[mid * seq_lines.step];
                         if (right ? !ranks_below(v, s) : ranks_below(s, v))
                           lo = mid + 1;
                         else
                           hi = mid;
                       }
                       op[line * n + i] = lo;
                     }
                   }
                 });
  });
}

}  // namespace

void register_sort_kernels() {
  constexpr size_t kCPU = static_cast<size_t>(DeviceType::CPU);
  ops::sort.kernels[kCPU] = sort_kernel;
  ops::topk.kernels[kCPU] = topk_kernel;
  ops::searchsorted.kernels[kCPU] = searchsorted_kernel;
}

}  // namespace kiln::cpu::kernels
