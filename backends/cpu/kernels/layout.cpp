// CPU kernels for the layout ops: cat, gather/scatter_add/scatter_reduce and
// index_select/index_add.
// Algorithm (gather, scatter_add): walk the index one "row" at a time, a row being every
// position along `dim` with the other coordinates fixed; rows are split across threads.
// Rows of scatter_add write disjoint output positions, so it runs in parallel without
// atomics and adds duplicates in a fixed order (deterministic results).
#include "kiln/ops/layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "loops.h"

namespace kiln::cpu::kernels {

namespace {

constexpr size_t kCPU = static_cast<size_t>(DeviceType::CPU);

int64_t dim_of(const KernelCall& c, int64_t rank) {
  return wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim, rank, c.op.name.c_str());
}

template <class T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.impl()->storage->data()) + t.storage_offset();
}

[[noreturn]] void index_error(const char* op, int64_t index, int64_t dim, int64_t size) {
  KILN_FAIL("[", op, "] index ", index, " is out of range for dim ", dim, " of size ", size,
            " (expected 0 <= index < ", size,
            "). Fix: check the index tensor (negative indices are not wrapped by ", op, ").");
}

void cat_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  int64_t d = dim_of(c, out.dim());
  int64_t start = 0;
  for (const Tensor& t : c.inputs) {
    if (t.dim() == 1 && t.size(0) == 0 && out.dim() != 1) continue;
    Tensor part = out.alias(t.sizes(), out.strides(), out.storage_offset() + start * out.stride(d));
    start += t.size(d);
    if (t.numel() == 0) continue;
    visit_compute_dtype(t.dtype(), "cat", [&](auto tag) {
      using T = decltype(tag);
      unary_loop<T, T>(part, t, [](T v) { return v; });
    });
  }
}

// The geometry shared by gather and scatter_add: the index's shape split into rows along
// `dim`, with the strides of every operand.
struct Rows {
  Shape sizes;                      // the index's sizes without dim
  Shape idx_st, data_st, other_st;  // strides of index, x/out, and src/out (without dim)
  int64_t n = 0, idx_step = 0, data_step = 0, other_step = 0, count = 0;
};

Rows make_rows(const Tensor& idx, const Tensor& data, const Tensor& other, int64_t dim) {
  Rows r;
  for (int64_t k = 0; k < idx.dim(); ++k) {
    if (k == dim) continue;
    r.sizes.push_back(idx.size(k));
    r.idx_st.push_back(idx.stride(k));
    r.data_st.push_back(data.stride(k));
    r.other_st.push_back(other.stride(k));
  }
  if (idx.dim() > 0) {
    r.n = idx.size(dim);
    r.idx_step = idx.stride(dim);
    r.data_step = data.stride(dim);
    r.other_step = other.stride(dim);
  } else {
    r.n = 1;
  }
  r.count = numel(r.sizes);
  return r;
}

// fn(idx_offset, data_offset, other_offset) for the first element of each row in [b, e).
template <class F>
void for_rows(const Rows& r, int64_t b, int64_t e, F fn) {
  for (int64_t row = b; row < e; ++row) {
    int64_t oi = 0, od = 0, oo = 0, rem = row;
    for (size_t k = r.sizes.size(); k-- > 0;) {
      int64_t i = rem % r.sizes[k];
      rem /= r.sizes[k];
      oi += i * r.idx_st[k];
      od += i * r.data_st[k];
      oo += i * r.other_st[k];
    }
    fn(oi, od, oo);
  }
}

// fn(out_offset, src_offset) for every element of the index, checked against `size`. Rows
// run in parallel: each writes only positions of its own (see the top).
template <class F>
void for_each_scattered(const Rows& r, const int64_t* ip, int64_t size, int64_t d, const char* op, F fn) {
  parallel_for(0, r.count, std::max<int64_t>(1, kParallelGrain / r.n), [&](int64_t b, int64_t e) {
    for_rows(r, b, e, [&](int64_t oi, int64_t oo, int64_t os) {
      for (int64_t k = 0; k < r.n; ++k) {
        const int64_t j = ip[oi + k * r.idx_step];
        if (j < 0 || j >= size) index_error(op, j, d, size);
        fn(oo + j * r.data_step, os + k * r.other_step);
      }
    });
  });
}

// out (index-shaped, contiguous) = x gathered along dim.
void gather_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &idx = c.inputs[1], &out = c.outputs[0];
  if (out.numel() == 0) return;
  int64_t d = dim_of(c, x.dim());
  int64_t size = x.dim() > 0 ? x.size(d) : 1;
  Rows r = make_rows(idx, x, out, d);
  const int64_t* ip = data_of<int64_t>(idx);
  visit_compute_dtype(x.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = data_of<T>(x);
    T* op = data_of<T>(out);
    parallel_for(0, r.count, std::max<int64_t>(1, kParallelGrain / r.n), [&](int64_t b, int64_t e) {
      for_rows(r, b, e, [&](int64_t oi, int64_t ox, int64_t oo) {
        for (int64_t k = 0; k < r.n; ++k) {
          int64_t j = ip[oi + k * r.idx_step];
          if (j < 0 || j >= size) index_error("gather", j, d, size);
          op[oo + k * r.other_step] = xp[ox + j * r.data_step];
        }
      });
    });
  });
}

// out = x; out[index] += src along dim.
void scatter_add_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &idx = c.inputs[1], &src = c.inputs[2], &out = c.outputs[0];
  if (out.numel() > 0) {
    visit_compute_dtype(x.dtype(), "scatter_add", [&](auto tag) {
      using T = decltype(tag);
      unary_loop<T, T>(out, x, [](T v) { return v; });
    });
  }
  if (idx.numel() == 0) return;
  int64_t d = dim_of(c, x.dim());
  int64_t size = x.dim() > 0 ? x.size(d) : 1;
  Rows r = make_rows(idx, out, src, d);
  const int64_t* ip = data_of<int64_t>(idx);
  visit_compute_dtype(x.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    T* op = data_of<T>(out);
    const T* sp = data_of<T>(src);
    for_each_scattered(r, ip, size, d, "scatter_add", [&](int64_t at, int64_t from) {
      if constexpr (std::is_same_v<T, bool>)
        op[at] |= sp[from];
      else
        op[at] += sp[from];
    });
  });
}

enum class Reduce { Sum, Prod, Mean, Max, Min, Replace };

Reduce reduce_of(const std::string& name) {
  if (name == "sum") return Reduce::Sum;
  if (name == "prod") return Reduce::Prod;
  if (name == "mean") return Reduce::Mean;
  if (name == "amax") return Reduce::Max;
  if (name == "amin") return Reduce::Min;
  return Reduce::Replace;
}

// a combined with b; max and min propagate NaN.
template <class T>
T combine(Reduce r, T a, T b) {
  switch (r) {
    case Reduce::Sum:
    case Reduce::Mean: return static_cast<T>(a + b);
    case Reduce::Prod: return static_cast<T>(a * b);
    case Reduce::Max:
    case Reduce::Min:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
      }
      return r == Reduce::Max ? std::max(a, b) : std::min(a, b);
    case Reduce::Replace: return b;
  }
  return b;
}

// out = x; each src value combined into out[index] along dim. Rows write disjoint positions
// (see the top), so they run in parallel and every position sees its values in index order:
// "replace" keeps the last, and the sums are deterministic.
void scatter_reduce_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &idx = c.inputs[1], &src = c.inputs[2], &out = c.outputs[0];
  const auto& a = static_cast<const ops::ScatterReduceAttrs&>(c.attrs);
  const Reduce r = reduce_of(a.reduce);
  if (out.numel() > 0) {
    visit_compute_dtype(x.dtype(), "scatter_reduce", [&](auto tag) {
      using T = decltype(tag);
      unary_loop<T, T>(out, x, [](T v) { return v; });
    });
  }
  if (idx.numel() == 0) return;
  KILN_CHECK(out.is_contiguous(), "[scatter_reduce] expected a contiguous output.");
  int64_t d = dim_of(c, x.dim());
  int64_t size = x.dim() > 0 ? x.size(d) : 1;
  Rows rows = make_rows(idx, out, src, d);
  const int64_t* ip = data_of<int64_t>(idx);
  // How many values reached each position: the mean's divisor, and (without include_self)
  // which positions still hold x's value.
  const bool counted = r == Reduce::Mean || (!a.include_self && r != Reduce::Replace);
  std::vector<int64_t> count(counted ? static_cast<size_t>(out.numel()) : 0, 0);
  visit_compute_dtype(x.dtype(), "scatter_reduce", [&](auto tag) {
    using T = decltype(tag);
    T* op = data_of<T>(out);
    const T* sp = data_of<T>(src);
    for_each_scattered(rows, ip, size, d, "scatter_reduce", [&](int64_t at, int64_t from) {
      const T v = sp[from];
      if (!counted) {
        op[at] = combine(r, op[at], v);
        return;
      }
      int64_t& n = count[static_cast<size_t>(at)];
      op[at] = n == 0 && !a.include_self ? v : combine(r, op[at], v);
      ++n;
    });
    if constexpr (!std::is_same_v<T, bool>) {
      if (r != Reduce::Mean) return;
      parallel_for(0, out.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t n = count[static_cast<size_t>(i)] + (a.include_self ? 1 : 0);
          if (count[static_cast<size_t>(i)] == 0) continue;
          if constexpr (std::is_floating_point_v<T>)
            op[i] = op[i] / static_cast<T>(n);
          else
            op[i] = static_cast<T>(op[i] / n - ((op[i] % n != 0) && ((op[i] < 0) != (n < 0)) ? 1 : 0));
        }
      });
    }
  });
}

// Reads a 1-D (or 0-d) index and checks every entry against `size`.
std::vector<int64_t> read_index_list(const Tensor& idx, const char* op, int64_t dim, int64_t size) {
  std::vector<int64_t> v(static_cast<size_t>(idx.numel()));
  const int64_t* p = data_of<int64_t>(idx);
  int64_t step = idx.dim() > 0 ? idx.stride(0) : 0;
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = p[static_cast<int64_t>(i) * step];
    if (v[i] < 0 || v[i] >= size) index_error(op, v[i], dim, size);
  }
  return v;
}

// x viewed as [outer, n, inner] around dim (x contiguous).
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};
Around around(const Tensor& x, int64_t d) {
  Around a;
  if (x.dim() == 0) return a;
  for (int64_t k = 0; k < d; ++k) a.outer *= x.size(k);
  a.n = x.size(d);
  for (int64_t k = d + 1; k < x.dim(); ++k) a.inner *= x.size(k);
  return a;
}

Tensor dense(const Tensor& t) {
  return t.is_contiguous() ? t : dense_copy(t);
}

void index_select_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  int64_t d = dim_of(c, c.inputs[0].dim());
  Tensor x = dense(c.inputs[0]);
  Around a = around(x, d);
  std::vector<int64_t> index = read_index_list(c.inputs[1], "index_select", d, a.n);
  if (out.numel() == 0) return;
  const int64_t m = static_cast<int64_t>(index.size()), inner = a.inner;
  const size_t bytes = static_cast<size_t>(inner) * x.element_size();
  const char* xp = static_cast<const char*>(x.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  // One task = one copied slice of `inner` elements.
  parallel_for(
      0, a.outer * m, std::max<int64_t>(1, kParallelGrain / inner), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / m, i = t % m;
          std::memcpy(op + static_cast<size_t>(t) * bytes,
                      xp + static_cast<size_t>(o * a.n + index[static_cast<size_t>(i)]) * bytes,
                      bytes);
        }
      });
}

void index_add_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  int64_t d = dim_of(c, c.inputs[0].dim());
  Around a = around(out, d);
  std::vector<int64_t> index = read_index_list(c.inputs[1], "index_add", d, a.n);
  Tensor src = dense(c.inputs[2]);
  visit_compute_dtype(out.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    if (out.numel() > 0) unary_loop<T, T>(out, c.inputs[0], [](T v) { return v; });
    if (src.numel() == 0) return;
    T* op = static_cast<T*>(out.raw_data());
    const T* sp = static_cast<const T*>(src.raw_data());
    const int64_t m = static_cast<int64_t>(index.size()), inner = a.inner;
    // Tasks own disjoint column blocks of the output, so duplicates in the index never race.
    constexpr int64_t B = 1024;
    const int64_t blocks = (inner + B - 1) / B;
    parallel_for(0, a.outer * blocks, std::max<int64_t>(1, kParallelGrain / (m * B)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t t = b; t < e; ++t) {
                     int64_t o = t / blocks, j0 = (t % blocks) * B, w = std::min(B, inner - j0);
                     for (int64_t i = 0; i < m; ++i) {
                       T* dst = op + (o * a.n + index[static_cast<size_t>(i)]) * inner + j0;
                       const T* s = sp + (o * m + i) * inner + j0;
                       for (int64_t j = 0; j < w; ++j) {
                         if constexpr (std::is_same_v<T, bool>)
                           dst[j] |= s[j];
                         else
                           dst[j] += s[j];
                       }
                     }
                   }
                 });
  });
}

}  // namespace

void register_layout_kernels() {
  ops::cat.kernels[kCPU] = cat_kernel;
  ops::gather.kernels[kCPU] = gather_kernel;
  ops::scatter_add.kernels[kCPU] = scatter_add_kernel;
  ops::scatter_reduce.kernels[kCPU] = scatter_reduce_kernel;
  ops::index_select.kernels[kCPU] = index_select_kernel;
  ops::index_add.kernels[kCPU] = index_add_kernel;
}

}  // namespace kiln::cpu::kernels
