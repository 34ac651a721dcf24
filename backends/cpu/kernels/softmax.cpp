// CPU kernels for softmax and log_softmax. Algorithm: view the input as [outer, n, inner]
// around the softmax dim. inner == 1 (the last dim): each row takes three Eigen-vectorized
// passes (max; exp and sum; scale). inner > 1: a [n, inner] slab is processed row by row
// with the max/sum kept per column, so the passes stay vectorized along the contiguous
// inner dim. Work is split over outer rows (and inner column blocks when outer is small).
#include "kiln/ops/softmax.h"

#include <cmath>

#include "eigen_maps.h"
#include "kernels.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

template <class T>
using Arr = EigenArray<T>;
template <class T>
using Vec = ArrayMap<T>;
template <class T>
using CVec = ConstArrayMap<T>;

template <class T, bool Log>
void softmax_row(const T* x, T* y, int64_t n) {
  CVec<T> xr(x, n);
  Vec<T> yr(y, n);
  const T m = xr.maxCoeff();
  if constexpr (Log) {
    const T lse = m + std::log((xr - m).exp().sum());
    yr = xr - lse;
  } else {
    yr = (xr - m).exp();
    yr *= T(1) / yr.sum();
  }
}

// Columns [c0, c1) of one [n, inner] slab; m and s are scratch of c1 - c0 entries.
template <class T, bool Log>
void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t c0, int64_t c1, Arr<T>& m,
                     Arr<T>& s) {
  const int64_t w = c1 - c0;
  m.setConstant(w, -std::numeric_limits<T>::infinity());
  s.setZero(w);
  for (int64_t r = 0; r < n; ++r) m = m.max(CVec<T>(x + r * inner + c0, w));
  for (int64_t r = 0; r < n; ++r) {
    Vec<T> yr(y + r * inner + c0, w);
    if constexpr (Log) {
      yr = CVec<T>(x + r * inner + c0, w) - m;
      s += yr.exp();
    } else {
      yr = (CVec<T>(x + r * inner + c0, w) - m).exp();
      s += yr;
    }
  }
  if constexpr (Log) {
    s = s.log();
    for (int64_t r = 0; r < n; ++r) Vec<T>(y + r * inner + c0, w) -= s;
  } else {
    s = s.inverse();
    for (int64_t r = 0; r < n; ++r) Vec<T>(y + r * inner + c0, w) *= s;
  }
}

template <bool Log>
void softmax_kernel(KernelCall& c) {
  const Tensor x = nn::dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  const int64_t dim =
      wrap_dim(static_cast<const ops::SoftmaxAttrs&>(c.attrs).dim, x.dim(), c.op.name.c_str());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < dim ? outer : d == dim ? n : inner) *= x.size(d);
  if (x.numel() == 0) return;
  visit_floating_dtype(x.dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    T* yp = nn::mdata<T>(out);
    if (inner == 1) {
      parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) softmax_row<T, Log>(xp + r * n, yp + r * n, n);
      });
      return;
    }
    // Column blocks of the inner dim give small-outer inputs enough parallel tasks; each
    // block row stays >= 256 elements wide so the strided passes keep long contiguous runs.
    const int64_t want = (2 * num_threads() + outer - 1) / outer;
    const int64_t block = std::min(inner, std::max<int64_t>(256, (inner + want - 1) / want));
    const int64_t blocks = (inner + block - 1) / block;
    parallel_for(0, outer * blocks, std::max<int64_t>(1, kParallelGrain / (n * block)),
                 [&](int64_t b, int64_t e) {
                   Arr<T> m, s;
                   for (int64_t t = b; t < e; ++t) {
                     int64_t o = t / blocks, c0 = (t % blocks) * block;
                     softmax_columns<T, Log>(xp + o * n * inner, yp + o * n * inner, n, inner, c0,
                                             std::min(inner, c0 + block), m, s);
                   }
                 });
  });
}

}  // namespace

void register_softmax_kernels() {
  ops::softmax.kernels[static_cast<size_t>(DeviceType::CPU)] = softmax_kernel<false>;
  ops::log_softmax.kernels[static_cast<size_t>(DeviceType::CPU)] = softmax_kernel<true>;
}

}  // namespace kiln::cpu::kernels
