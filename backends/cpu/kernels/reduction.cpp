// CPU kernels for the reduction ops: value reductions on reduce.h, and the arg-reductions
// (max_dim/min_dim) that also track where the winner came from.
#include "kiln/ops/reduction.h"

#include <cmath>
#include <limits>

#include "kernels.h"
#include "loops.h"
#include "reduce.h"
#include "wrapping.h"

namespace kiln::cpu::kernels {

namespace {

constexpr size_t kCPU = static_cast<size_t>(DeviceType::CPU);

template <class T, class A>
struct SumR {
  using Acc = A;
  Acc init() const { return Acc(0); }
  Acc step(Acc a, T x) const { return wrapping_add(a, static_cast<Acc>(x)); }
  Acc merge(Acc a, Acc b) const { return wrapping_add(a, b); }
  A done(Acc a, int64_t) const { return a; }
};

template <class T, class A>
struct ProdR {
  using Acc = A;
  Acc init() const { return Acc(1); }
  Acc step(Acc a, T x) const { return wrapping_mul(a, static_cast<Acc>(x)); }
  Acc merge(Acc a, Acc b) const { return wrapping_mul(a, b); }
  A done(Acc a, int64_t) const { return a; }
};

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}

// The first nan wins and sticks (nan propagates, as in PyTorch).
template <class T, bool IsMax>
struct ExtremeR {
  using Acc = T;
  Acc init() const {
    if constexpr (std::is_same_v<T, bool>)
      return !IsMax;
    else if constexpr (std::is_floating_point_v<T>)
      return IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      return IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  // x replaces a when a is not nan and x is not <= a (x > a, or x is nan). GCC vectorizes
  // this spelling; spelling out the nan cases with isnan runs 3x slower.
  static bool better(T x, T a) {
    if constexpr (std::is_floating_point_v<T>)
      return !(IsMax ? x <= a : x >= a) && a == a;
    else
      return IsMax ? x > a : x < a;
  }
  Acc step(Acc a, T x) const { return better(x, a) ? x : a; }
  Acc merge(Acc a, Acc b) const { return better(b, a) ? b : a; }
  T done(Acc a, int64_t) const { return a; }
};

// Bytes rather than bools as lanes: GCC vectorizes uint8_t and/or, not bool (11x).
template <class T, bool IsAll>
struct LogicalR {
  using Acc = uint8_t;
  Acc init() const { return IsAll; }
  Acc step(Acc a, T x) const { return IsAll ? (a & Acc(x != T(0))) : (a | Acc(x != T(0))); }
  Acc merge(Acc a, Acc b) const { return IsAll ? (a & b) : (a | b); }
  bool done(Acc a, int64_t) const { return a != 0; }
};

// Welford's running mean and sum of squared deviations, merged with Chan's formula.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
};
template <class T>
struct VarR {
  using Acc = Moments;
  double correction;
  Acc init() const { return {}; }
  Acc step(Acc a, T x) const {
    double v = static_cast<double>(x);
    a.n += 1;
    double d = v - a.mean;
    a.mean += d / a.n;
    a.m2 += d * (v - a.mean);
    return a;
  }
  Acc merge(Acc a, Acc b) const {
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    double n = a.n + b.n, d = b.mean - a.mean;
    return {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)};
  }
  // N - correction <= 0 divides by zero (nan or inf), as in PyTorch.
  T done(Acc a, int64_t) const { return static_cast<T>(a.m2 / std::max(0.0, a.n - correction)); }
};

enum class NormKind { Zero, One, Two, Inf, NegInf, General };

template <class T, NormKind K>
struct NormR {
  using Acc = T;
  T p = 2;
  Acc init() const { return K == NormKind::NegInf ? std::numeric_limits<T>::infinity() : T(0); }
  Acc step(Acc a, T x) const {
    T ax = std::abs(x);
    if constexpr (K == NormKind::Zero)
      return a + static_cast<T>(x != T(0));
    else if constexpr (K == NormKind::One)
      return a + ax;
    else if constexpr (K == NormKind::Two)
      return a + x * x;
    else if constexpr (K == NormKind::Inf)
      return ExtremeR<T, true>::better(ax, a) ? ax : a;
    else if constexpr (K == NormKind::NegInf)
      return ExtremeR<T, false>::better(ax, a) ? ax : a;
    else
      return a + std::pow(ax, p);
  }
  Acc merge(Acc a, Acc b) const {
    if constexpr (K == NormKind::Inf || K == NormKind::NegInf)
      return step(a, b);
    else
      return a + b;
  }
  T done(Acc a, int64_t) const {
    if constexpr (K == NormKind::Two)
      return std::sqrt(a);
    else if constexpr (K == NormKind::General)
      return std::pow(a, T(1) / p);
    else
      return a;
  }
};

uint64_t mask_of(const KernelCall& c, IntList dims) {
  return reduction_mask(dims, c.inputs[0].dim(), c.op.name.c_str());
}
const ops::ReduceAttrs& reduce_attrs(const KernelCall& c) {
  return static_cast<const ops::ReduceAttrs&>(c.attrs);
}

void sum_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  uint64_t mask = mask_of(c, reduce_attrs(c).dims);
  visit_compute_dtype(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      reduce<T, T>(x, c.outputs[0], mask, SumR<T, T>{});
    else
      reduce<T, int64_t>(x, c.outputs[0], mask, SumR<T, int64_t>{});
  });
}

void prod_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  uint64_t mask = mask_of(c, reduce_attrs(c).dims);
  visit_compute_dtype(x.dtype(), "prod", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      reduce<T, T>(x, c.outputs[0], mask, ProdR<T, T>{});
    else
      reduce<T, int64_t>(x, c.outputs[0], mask, ProdR<T, int64_t>{});
  });
}

template <bool IsMax>
void extreme_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  uint64_t mask = mask_of(c, reduce_attrs(c).dims);
  visit_compute_dtype(x.dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    reduce<T, T>(x, c.outputs[0], mask, ExtremeR<T, IsMax>{});
  });
}

template <bool IsAll>
void logical_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  uint64_t mask = mask_of(c, reduce_attrs(c).dims);
  visit_compute_dtype(x.dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    reduce<T, bool>(x, c.outputs[0], mask, LogicalR<T, IsAll>{});
  });
}

void var_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const ops::VarAttrs&>(c.attrs);
  uint64_t mask = mask_of(c, a.dims);
  visit_floating_dtype(x.dtype(), "var", [&](auto tag) {
    using T = decltype(tag);
    reduce<T, T>(x, c.outputs[0], mask, VarR<T>{a.correction});
  });
}

void norm_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const ops::NormAttrs&>(c.attrs);
  uint64_t mask = mask_of(c, a.dims);
  visit_floating_dtype(x.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    const Tensor& o = c.outputs[0];
    if (a.p == 0)
      reduce<T, T>(x, o, mask, NormR<T, NormKind::Zero>{});
    else if (a.p == 1)
      reduce<T, T>(x, o, mask, NormR<T, NormKind::One>{});
    else if (a.p == 2)
      reduce<T, T>(x, o, mask, NormR<T, NormKind::Two>{});
    else if (std::isinf(a.p) && a.p > 0)
      reduce<T, T>(x, o, mask, NormR<T, NormKind::Inf>{});
    else if (std::isinf(a.p))
      reduce<T, T>(x, o, mask, NormR<T, NormKind::NegInf>{});
    else
      reduce<T, T>(x, o, mask, NormR<T, NormKind::General>{static_cast<T>(a.p)});
  });
}

// ---- arg-reductions ----

// Whether candidate (v, i) beats (best, bi) when merging partial results: the first nan,
// else the extreme value, else (a tie) the smaller index.
template <class T, bool IsMax>
bool wins(T v, int64_t i, T best, int64_t bi) {
  if (is_nan(best)) return is_nan(v) && i < bi;
  if (is_nan(v)) return true;
  if (v == best) return i < bi;
  return IsMax ? v > best : v < best;
}

// The extreme of p[0], p[step], ..., p[(n-1)*step] and its index. Dense rows run L
// independent lanes (each keeping its first winner) so the compare-and-select vectorizes.
template <class T, bool IsMax>
void scan(const T* p, int64_t n, int64_t step, T& out_v, int64_t& out_i) {
  using R = ExtremeR<T, IsMax>;
  constexpr int64_t L = 8;
  T best = p[0];
  int64_t bi = 0, r = 1;
  if (step == 1 && n >= 2 * L) {
    T lv[L];
    int64_t li[L];
    for (int64_t l = 0; l < L; ++l) lv[l] = p[l], li[l] = l;
    for (r = L; r + L <= n; r += L) {
      for (int64_t l = 0; l < L; ++l) {
        bool take = R::better(p[r + l], lv[l]);
        lv[l] = take ? p[r + l] : lv[l];
        li[l] = take ? r + l : li[l];
      }
    }
    best = lv[0], bi = li[0];
    for (int64_t l = 1; l < L; ++l)
      if (wins<T, IsMax>(lv[l], li[l], best, bi)) best = lv[l], bi = li[l];
    // The tail's indices exceed every lane's, so in-order "better" keeps the first winner.
  }
  for (; r < n; ++r)
    if (R::better(p[r * step], best)) best = p[r * step], bi = r;
  out_v = best;
  out_i = bi;
}

// Writes the extreme of x along `dim` and its index into contiguous outputs. Two plans,
// both parallel over outputs: when some kept dim has a smaller stride than `dim` (e.g.
// reducing dim 0 of a matrix, or a transposed input), blocks of outputs along that dim
// advance together through the reduced dim (unit-stride, cache-friendly); otherwise each
// output scans its own row.
template <class T, bool IsMax>
void arg_reduce(const Tensor& x, int64_t dim, T* vals, int64_t* idxs) {
  using R = ExtremeR<T, IsMax>;
  const T* base = static_cast<const T*>(x.raw_data());
  if (x.dim() == 0) {
    vals[0] = base[0];
    idxs[0] = 0;
    return;
  }
  const int64_t n = x.size(dim), n_out = x.numel() / std::max<int64_t>(n, 1);
  if (n_out == 0 || n == 0) return;
  const int64_t rs = x.stride(dim);
  Shape kept_sizes, kept_strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim) continue;
    kept_sizes.push_back(x.size(d));
    kept_strides.push_back(x.stride(d));
  }
  Shape out_strides = contiguous_strides(kept_sizes);
  int64_t j = -1;  // the kept dim blocks run along
  for (size_t k = 0; k < kept_sizes.size(); ++k)
    if (kept_sizes[k] > 1 && std::abs(kept_strides[k]) < std::abs(rs) &&
        (j < 0 || std::abs(kept_strides[k]) < std::abs(kept_strides[j])))
      j = static_cast<int64_t>(k);

  if (j < 0) {
    parallel_for(0, n_out, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t off = 0, rem = i;
        for (size_t d = kept_sizes.size(); d-- > 0;) {
          off += (rem % kept_sizes[d]) * kept_strides[d];
          rem /= kept_sizes[d];
        }
        scan<T, IsMax>(base + off, n, rs, vals[i], idxs[i]);
      }
    });
    return;
  }

  constexpr int64_t B = 256;
  const int64_t size_j = kept_sizes[j], js = kept_strides[j], ojs = out_strides[j];
  const int64_t blocks = (size_j + B - 1) / B, n_other = n_out / size_j;
  parallel_for(0, n_other * blocks, std::max<int64_t>(1, kParallelGrain / (n * B)),
               [&](int64_t b, int64_t e) {
                 T v[B];
                 int64_t ix[B];
                 for (int64_t t = b; t < e; ++t) {
                   int64_t other = t / blocks, j0 = (t % blocks) * B, w = std::min(B, size_j - j0);
                   int64_t xo = j0 * js, oo = j0 * ojs, rem = other;
                   for (size_t d = kept_sizes.size(); d-- > 0;) {
                     if (static_cast<int64_t>(d) == j) continue;
                     int64_t c = rem % kept_sizes[d];
                     rem /= kept_sizes[d];
                     xo += c * kept_strides[d];
                     oo += c * out_strides[d];
                   }
                   const T* p = base + xo;
                   for (int64_t q = 0; q < w; ++q) v[q] = p[q * js], ix[q] = 0;
                   for (int64_t r = 1; r < n; ++r) {
                     const T* row = p + r * rs;
                     if (js == 1) {
                       for (int64_t q = 0; q < w; ++q) {
                         bool take = R::better(row[q], v[q]);
                         v[q] = take ? row[q] : v[q];
                         ix[q] = take ? r : ix[q];
                       }
                     } else {
                       for (int64_t q = 0; q < w; ++q) {
                         bool take = R::better(row[q * js], v[q]);
                         v[q] = take ? row[q * js] : v[q];
                         ix[q] = take ? r : ix[q];
                       }
                     }
                   }
                   for (int64_t q = 0; q < w; ++q)
                     vals[oo + q * ojs] = v[q], idxs[oo + q * ojs] = ix[q];
                 }
               });
}

template <bool IsMax>
void dim_extreme_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const ops::DimReduceAttrs&>(c.attrs);
  int64_t dim = wrap_dim(a.dim, x.dim(), c.op.name.c_str());
  visit_compute_dtype(x.dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    arg_reduce<T, IsMax>(x, dim, static_cast<T*>(c.outputs[0].raw_data()),
                         static_cast<int64_t*>(c.outputs[1].raw_data()));
  });
}

}  // namespace

void register_reduction_kernels() {
  ops::sum.kernels[kCPU] = sum_kernel;
  ops::prod.kernels[kCPU] = prod_kernel;
  ops::amax.kernels[kCPU] = extreme_kernel<true>;
  ops::amin.kernels[kCPU] = extreme_kernel<false>;
  ops::all.kernels[kCPU] = logical_kernel<true>;
  ops::any.kernels[kCPU] = logical_kernel<false>;
  ops::max_dim.kernels[kCPU] = dim_extreme_kernel<true>;
  ops::min_dim.kernels[kCPU] = dim_extreme_kernel<false>;
  ops::var.kernels[kCPU] = var_kernel;
  ops::norm.kernels[kCPU] = norm_kernel;
}

}  // namespace kiln::cpu::kernels
