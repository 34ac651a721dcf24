// The CPU elementwise loop engine. Algorithm: broadcast every input to the output's shape
// (stride 0 on broadcast dims), merge dims that are contiguous for every operand, then cut
// the flat index range into chunks for the thread pool. Each chunk walks 1-D strips of the
// innermost dim; strips where every operand is dense or a broadcast scalar take loops the
// compiler vectorizes.
#pragma once

#include <array>
#include <cstring>
#include <type_traits>

#include "kiln/op.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::kernels {

template <size_t N>  // N operands: outputs first, then inputs
struct StridedLoop {
  Shape sizes;                    // after merging, innermost last
  std::array<Shape, N> strides;   // in bytes
  std::array<char*, N> base;
  int64_t numel = 0;
};

template <size_t N>
StridedLoop<N> make_loop(IntList out_sizes, const std::array<const Tensor*, N>& operands) {
  StridedLoop<N> loop;
  size_t rank = out_sizes.size();
  loop.numel = numel(out_sizes);
  for (size_t k = 0; k < N; ++k) {
    const Tensor& t = *operands[k];
    loop.base[k] = static_cast<char*>(t.impl()->storage->data()) +
                   t.storage_offset() * static_cast<int64_t>(t.element_size());
    Shape st(rank, 0);
    size_t lead = rank - static_cast<size_t>(t.dim());
    for (size_t d = lead; d < rank; ++d) {
      int64_t size = t.sizes()[d - lead];
      st[d] = size == 1 && out_sizes[d] != 1 ? 0 : t.strides()[d - lead] * static_cast<int64_t>(t.element_size());
    }
    loop.strides[k] = std::move(st);
  }
  // Drop size-1 dims, then merge dim d into d+1 where every operand allows it.
  Shape sizes;
  std::array<Shape, N> strides;
  for (size_t d = 0; d < rank; ++d) {
    if (out_sizes[d] == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = strides[k].back() == loop.strides[k][d] * out_sizes[d];
    if (merge) {
      sizes.back() *= out_sizes[d];
      for (size_t k = 0; k < N; ++k) strides[k].back() = loop.strides[k][d];
    } else {
      sizes.push_back(out_sizes[d]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(loop.strides[k][d]);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) strides[k].push_back(0);
  }
  loop.sizes = std::move(sizes);
  loop.strides = std::move(strides);
  return loop;
}

// Calls strip(ptrs, inner_strides, n) over every 1-D strip of the loop, in parallel chunks.
template <size_t N, class Strip>
void run_loop(const StridedLoop<N>& loop, Strip&& strip, int64_t grain = kParallelGrain) {
  if (loop.numel == 0) return;
  const size_t rank = loop.sizes.size();
  const int64_t inner = loop.sizes[rank - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = loop.strides[k][rank - 1];

  parallel_for_fast(0, loop.numel, grain, [&](int64_t begin, int64_t end) {
    // Multi-index of `begin`.
    Shape idx(rank, 0);
    int64_t rem = begin;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % loop.sizes[d];
      rem /= loop.sizes[d];
    }
    std::array<char*, N> ptrs;
    for (size_t k = 0; k < N; ++k) {
      char* p = loop.base[k];
      for (size_t d = 0; d < rank; ++d) p += idx[d] * loop.strides[k][d];
      ptrs[k] = p;
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t n = std::min(inner - idx[rank - 1], end - pos);
      strip(ptrs, inner_strides, n);
      pos += n;
      if (pos >= end) break;
      // Advance to the start of the next strip.
      for (size_t k = 0; k < N; ++k) ptrs[k] += (n - 1) * inner_strides[k];
      idx[rank - 1] += n - 1;
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < loop.sizes[d]) {
          for (size_t k = 0; k < N; ++k) ptrs[k] += loop.strides[k][d];
          break;
        }
        for (size_t k = 0; k < N; ++k) ptrs[k] -= (loop.sizes[d] - 1) * loop.strides[k][d];
        idx[d] = 0;
      }
    }
  });
}

// True when `out` is dense and every input is either dense with out's shape or a single
// element: the common case, which skips the general strided machinery.
inline bool flat_operands(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  if (!out.is_contiguous()) return false;
  const int64_t n = out.numel();
  for (const Tensor* t : inputs) {
    if (t->numel() == 1) continue;
    if (t->numel() != n || !t->is_contiguous() || t->dim() != out.dim() ||
        !std::equal(t->sizes().begin(), t->sizes().end(), out.sizes().begin()))
      return false;
  }
  return true;
}

template <class T>
inline const T* first_element(const Tensor& t) {
  return reinterpret_cast<const T*>(static_cast<const char*>(t.impl()->storage->data()) +
                                    t.storage_offset() * static_cast<int64_t>(sizeof(T)));
}
template <class T>
inline T* first_element_mut(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.impl()->storage->data()) +
                              t.storage_offset() * static_cast<int64_t>(sizeof(T)));
}

// out[i] = f(a[i]). Out and In are the C++ element types.
template <class Out, class In, class F>
void unary_loop(const Tensor& out, const Tensor& a, F f, int64_t grain = kParallelGrain) {
  if (a.numel() == out.numel() && flat_operands(out, {&a}) && out.dtype() == dtype_of<Out>()) {
    Out* o = first_element_mut<Out>(out);
    const In* x = first_element<In>(a);
    if (a.numel() == 1 && out.numel() == 1) {
      *o = f(*x);
      return;
    }
    parallel_for_fast(0, out.numel(), grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f(x[i]);
    });
    return;
  }
  auto loop = make_loop<2>(out.sizes(), {&out, &a});
  run_loop(loop, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const In* x = reinterpret_cast<const In*>(p[1]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
    }
  }, grain);
}

// out[i] = f(a[i], b[i]) with broadcasting.
template <class Out, class A, class B, class F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f, int64_t grain = kParallelGrain) {
  if (flat_operands(out, {&a, &b})) {
    Out* o = first_element_mut<Out>(out);
    const A* x = first_element<A>(a);
    const B* y = first_element<B>(b);
    const int64_t n = out.numel();
    const bool xs = a.numel() == 1 && n != 1, ys = b.numel() == 1 && n != 1;
    parallel_for_fast(0, n, grain, [&](int64_t lo, int64_t hi) {
      if (xs) {
        const A xv = *x;
        for (int64_t i = lo; i < hi; ++i) o[i] = f(xv, y[i]);
      } else if (ys) {
        const B yv = *y;
        for (int64_t i = lo; i < hi; ++i) o[i] = f(x[i], yv);
      } else {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(x[i], y[i]);
      }
    });
    return;
  }
  auto loop = make_loop<3>(out.sizes(), {&out, &a, &b});
  run_loop(loop, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const A* x = reinterpret_cast<const A*>(p[1]);
    const B* y = reinterpret_cast<const B*>(p[2]);
    bool dense_out = s[0] == sizeof(Out);
    if (dense_out && s[1] == sizeof(A) && s[2] == sizeof(B)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (dense_out && s[1] == sizeof(A) && s[2] == 0) {
      const B yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (dense_out && s[1] == 0 && s[2] == sizeof(B)) {
      const A xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                                                     *reinterpret_cast<const B*>(p[2] + i * s[2]));
    }
  }, grain);
}

// out[i] = f(a[i], b[i], c[i]) with broadcasting (where, clamp with tensor bounds, ...).
template <class Out, class A, class B, class C, class F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f,
                  int64_t grain = kParallelGrain) {
  auto loop = make_loop<4>(out.sizes(), {&out, &a, &b, &c});
  run_loop(loop, [&](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                                                   *reinterpret_cast<const B*>(p[2] + i * s[2]),
                                                   *reinterpret_cast<const C*>(p[3] + i * s[3]));
  }, grain);
}

// A dense copy of `t` (kernels use it when a library needs contiguous data).
inline Tensor dense_copy(const Tensor& t) {
  Tensor out = Tensor::empty(t.sizes(), t.dtype(), t.device());
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(out, t, [](T x) { return x; });
  });
  return out;
}

// Calls fn(T{}) for the compute dtypes (bool, int32, int64, float32, float64).
template <class Fn>
decltype(auto) visit_compute_dtype(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::Bool: return fn(bool{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    default: break;
  }
  KILN_FAIL("[", op, "] has no CPU kernel for ", t, ".");
}

template <class Fn>
decltype(auto) visit_floating_dtype(DType t, const char* op, Fn&& fn) {
  if (t == DType::Float32) return fn(float{});
  KILN_CHECK(t == DType::Float64, "[", op, "] has no CPU kernel for ", t, ".");
  return fn(double{});
}

}  // namespace kiln::cpu::kernels
