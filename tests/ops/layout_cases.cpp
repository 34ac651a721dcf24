// OpCases for the layout ops (cat, gather, scatter_add, index_select, index_add), the
// composites built on them (stack, split, chunk, masked_fill, tril, triu), as_strided's
// gradient, and the layout errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_util.h"

#include "harness.h"
#include "kiln/ops/layout.h"

namespace kiln::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using RefFn = std::function<Ref(const std::vector<Ref>&)>;
using Runs = std::vector<std::vector<Input>>;

OpCase make(std::string op, std::string label, Runs runs, Fn fn, RefFn ref,
            std::vector<DType> dtypes = {kFloat32, kFloat64, kInt64}) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  c.dtypes = std::move(dtypes);
  return c;
}

Input index(Shape shape, int64_t high) {
  Input in{std::move(shape), Gen::Index, kInt64, high};
  in.grad = false;
  return in;
}

// Row-major multi-index <-> offset helpers for the references.
Shape unravel(int64_t i, IntList shape) {
  Shape idx(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}
int64_t ravel(IntList idx, IntList shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

Ref ref_cat(const std::vector<Ref>& parts, int64_t dim) {
  std::vector<const Ref*> used;
  for (const Ref& p : parts)
    if (!(p.shape.size() == 1 && p.shape[0] == 0)) used.push_back(&p);
  if (used.empty()) return Ref{Shape{0}, {}};
  Shape out = used[0]->shape;
  int64_t d = dim < 0 ? dim + static_cast<int64_t>(out.size()) : dim;
  out[d] = 0;
  for (const Ref* p : used) out[d] += p->shape[d];
  Ref r{out, std::vector<double>(static_cast<size_t>(numel(out)))};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape idx = unravel(i, out);
    int64_t k = idx[d];
    for (const Ref* p : used) {
      if (k < p->shape[d]) {
        Shape local = idx;
        local[d] = k;
        r.v[i] = p->v[ravel(local, p->shape)];
        break;
      }
      k -= p->shape[d];
    }
  }
  return r;
}

Register cat_cases({
    make(
        "cat", "dim0", {{{{2, 3}}, {{4, 3}}, {{1, 3}}}, {{{200, 70}}, {{100, 70}}, {{1, 70}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::cat({in[0], in[1], in[2]}, 0);
        },
        [](const std::vector<Ref>& r) { return ref_cat(r, 0); }),
    make(
        "cat", "last_dim_with_empty",
        {{{{2, 3}}, {{2, 1}}, {{2, 0}}}, {{{2, 3, 4}}, {{2, 3, 1}}, {{2, 3, 2}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::cat({in[0], in[1], in[2]}, -1);
        },
        [](const std::vector<Ref>& r) { return ref_cat(r, -1); }),
    make(
        "cat", "middle_single", {{{{2, 3, 4}}}},
        [](const std::vector<Tensor>& in) { return kiln::cat({in[0]}, 1); },
        [](const std::vector<Ref>& r) { return ref_cat(r, 1); }),
    // PyTorch's legacy rule: a [0] tensor is skipped whatever the others' rank.
    make(
        "cat", "legacy_empty_1d", {{{{0}}, {{2, 3}}, {{0}}, {{1, 3}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::cat({in[0], in[1], in[2], in[3]}, 0);
        },
        [](const std::vector<Ref>& r) { return ref_cat(r, 0); }),
    make(
        "cat", "stack_composite", {{{{3, 4}}, {{3, 4}}}, {{{}}, {{}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::stack({in[0], in[1]}, -1);
        },
        [](const std::vector<Ref>& r) {
          Shape s = r[0].shape;
          s.push_back(2);
          Ref out{s, std::vector<double>(r[0].v.size() * 2)};
          for (size_t i = 0; i < r[0].v.size(); ++i)
            out.v[2 * i] = r[0].v[i], out.v[2 * i + 1] = r[1].v[i];
          return out;
        }),
    make(
        "cat", "stack_dim0", {{{{3, 4}}, {{3, 4}}, {{3, 4}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::stack({in[0], in[1], in[2]});
        },
        [](const std::vector<Ref>& r) {
          Ref out{Shape{3, 3, 4}, {}};
          for (const Ref& p : r) out.v.insert(out.v.end(), p.v.begin(), p.v.end());
          return out;
        }),
});

// Pieces of split/chunk are slices; the table checks one piece (values and gradient).
Register split_cases({
    make(
        "slice", "split_piece", {{{{7, 3}}}},
        [](const std::vector<Tensor>& in) { return kiln::split(in[0], 3, 0)[2]; },
        [](const std::vector<Ref>& r) {
          return Ref{Shape{1, 3}, {r[0].v.begin() + 18, r[0].v.end()}};
        }),
    make(
        "slice", "split_sizes_piece", {{{{2, 6}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::split(in[0], {1, 3, 2}, 1)[1];
        },
        [](const std::vector<Ref>& r) {
          Ref out{Shape{2, 3}, {}};
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 1; j < 4; ++j) out.v.push_back(r[0].v[i * 6 + j]);
          return out;
        }),
    make(
        "slice", "chunk_piece", {{{{3, 5}}}},
        [](const std::vector<Tensor>& in) { return kiln::chunk(in[0], 2, -1)[1]; },
        [](const std::vector<Ref>& r) {
          Ref out{Shape{3, 2}, {}};
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 3; j < 5; ++j) out.v.push_back(r[0].v[i * 5 + j]);
          return out;
        }),
});

Ref ref_gather(const Ref& x, const Ref& idx, int64_t dim) {
  Ref r{idx.shape, std::vector<double>(idx.v.size())};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, idx.shape);
    if (!at.empty()) at[dim] = static_cast<int64_t>(idx.v[i]);
    r.v[i] = x.v[ravel(at, x.shape)];
  }
  return r;
}

Ref ref_scatter_add(const Ref& x, const Ref& idx, const Ref& src, int64_t dim) {
  Ref r = x;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    Shape at = unravel(i, idx.shape);
    double s = src.v[ravel(at, src.shape)];
    if (!at.empty()) at[dim] = static_cast<int64_t>(idx.v[i]);
    r.v[ravel(at, x.shape)] += s;
  }
  return r;
}

Register gather_cases({
    make(
        "gather", "dim0",
        {{{{4, 5}}, index({3, 5}, 4)},
         {{{4, 5}}, index({6, 2}, 4)},
         {{{300, 200}}, index({400, 200}, 300)}},
        [](const std::vector<Tensor>& in) { return kiln::gather(in[0], 0, in[1]); },
        [](const std::vector<Ref>& r) { return ref_gather(r[0], r[1], 0); }),
    make(
        "gather", "last_dim", {{{{3, 4, 5}}, index({3, 2, 7}, 5)}, {{{3, 6}}, index({2, 0}, 6)}},
        [](const std::vector<Tensor>& in) { return kiln::gather(in[0], -1, in[1]); },
        [](const std::vector<Ref>& r) {
          return ref_gather(r[0], r[1], static_cast<int64_t>(r[0].shape.size()) - 1);
        }),
    make(
        "gather", "zero_d", {{{{}}, index({}, 1)}},
        [](const std::vector<Tensor>& in) { return kiln::gather(in[0], 0, in[1]); },
        [](const std::vector<Ref>& r) { return ref_gather(r[0], r[1], 0); }),
});

Register scatter_cases({
    // Many duplicates: 6 rows scattered into 4.
    make(
        "scatter_add", "dim0_duplicates",
        {{{{4, 5}}, index({6, 5}, 4), {{6, 5}}},
         {{{200, 300}}, index({500, 300}, 200), {{500, 300}}}},
        [](const std::vector<Tensor>& in) { return kiln::scatter_add(in[0], 0, in[1], in[2]); },
        [](const std::vector<Ref>& r) { return ref_scatter_add(r[0], r[1], r[2], 0); }),
    // src larger than index: only its leading block is used (and gets gradient).
    make(
        "scatter_add", "dim1_src_larger", {{{{3, 5}}, index({2, 3}, 5), {{3, 4}}}},
        [](const std::vector<Tensor>& in) { return kiln::scatter_add(in[0], 1, in[1], in[2]); },
        [](const std::vector<Ref>& r) { return ref_scatter_add(r[0], r[1], r[2], 1); }),
    make(
        "scatter_add", "zero_d_and_empty",
        {{{{}}, index({}, 1), {{}}}, {{{3, 2}}, index({0, 2}, 3), {{1, 2}}}},
        [](const std::vector<Tensor>& in) { return kiln::scatter_add(in[0], 0, in[1], in[2]); },
        [](const std::vector<Ref>& r) { return ref_scatter_add(r[0], r[1], r[2], 0); }),
});

// scatter_reduce, walking the index in row-major order: along dim, that is index order, so
// "replace" keeps the last value and every position sees its values in order.
Ref ref_scatter_reduce(const Ref& x, const Ref& idx, const Ref& src, int64_t dim, const std::string& reduce,
                       bool include_self) {
  Ref r = x;
  std::vector<int64_t> count(static_cast<size_t>(x.numel()), 0);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    Shape at = unravel(i, idx.shape);
    const double s = src.v[ravel(at, src.shape)];
    if (!at.empty()) at[dim] = static_cast<int64_t>(idx.v[i]);
    const int64_t t = ravel(at, x.shape);
    double& v = r.v[t];
    if (reduce == "replace") {
      v = s;
      continue;
    }
    if (!include_self && count[t] == 0) {
      v = s;
    } else if (reduce == "sum" || reduce == "mean") {
      v += s;
    } else if (reduce == "prod") {
      v *= s;
    } else {
      v = reduce == "amax" ? std::max(v, s) : std::min(v, s);
    }
    ++count[t];
  }
  if (reduce == "mean")
    for (size_t t = 0; t < count.size(); ++t)
      if (count[t] > 0) r.v[t] /= static_cast<double>(count[t] + (include_self ? 1 : 0));
  return r;
}

std::vector<OpCase> scatter_reduce_cases() {
  std::vector<OpCase> out;
  for (const std::string reduce : {"sum", "prod", "mean", "amax", "amin"}) {
    for (bool include_self : {true, false}) {
      // Integers too where the reference is exact (mean floors them: tested on its own).
      std::vector<DType> dtypes = {kFloat32, kFloat64};
      if (reduce != "mean") dtypes.push_back(kInt64);
      out.push_back(make(
          "scatter_reduce", reduce + (include_self ? "_with_self" : "_without_self"),
          {{{{4, 5}}, index({6, 5}, 4), {{6, 5}}},
           {{{3, 5}}, index({2, 3}, 3), {{3, 4}}},
           {{{200, 30}}, index({500, 30}, 200), {{500, 30}}}},
          [=](const std::vector<Tensor>& in) { return kiln::scatter_reduce(in[0], 0, in[1], in[2], reduce, include_self); },
          [=](const std::vector<Ref>& r) { return ref_scatter_reduce(r[0], r[1], r[2], 0, reduce, include_self); },
          dtypes));
      if (reduce == "prod") out.back().f32_tol = 1e-4;
    }
  }
  out.push_back(make(
      "scatter_reduce", "replace_dim1",
      {{{{3, 5}}, index({3, 7}, 5), {{3, 7}}}, {{{4, 6}}, index({2, 3}, 6), {{3, 4}}},
       {{{30, 200}}, index({30, 500}, 200), {{30, 500}}}},
      [](const std::vector<Tensor>& in) { return kiln::scatter(in[0], 1, in[1], in[2]); },
      [](const std::vector<Ref>& r) { return ref_scatter_reduce(r[0], r[1], r[2], 1, "replace", true); },
      {kFloat32, kFloat64, kInt64}));
  out.push_back(make(
      "scatter_reduce", "replace_scalar_value", {{{{4, 5}}, index({6, 5}, 4)}},
      [](const std::vector<Tensor>& in) { return kiln::scatter(in[0], 0, in[1], Scalar(1.5)); },
      [](const std::vector<Ref>& r) {
        Ref src{r[1].shape, std::vector<double>(static_cast<size_t>(r[1].numel()), 1.5)};
        return ref_scatter_reduce(r[0], r[1], src, 0, "replace", true);
      },
      {kFloat32, kFloat64}));
  return out;
}

Register scatter_reduce_registered(scatter_reduce_cases());

// Advanced indexing of x [4, 5, 3] by the index tensors of `at` (same shape B), each reading
// one x coordinate; `map(b, other)` gives x's coordinates for B position b and the result's
// remaining coordinates. `shape` is the result's.
Ref ref_index(const Ref& x, Shape shape, const std::function<Shape(const Shape&)>& source) {
  Ref out{shape, std::vector<double>(static_cast<size_t>(numel(shape)))};
  for (int64_t i = 0; i < out.numel(); ++i) out.v[static_cast<size_t>(i)] = x.v[ravel(source(unravel(i, shape)), x.shape)];
  return out;
}

Shape cat_shape(const Shape& a, const Shape& b) {
  Shape out = a;
  for (int64_t s : b) out.push_back(s);
  return out;
}

Register indexing_cases({
    // x[i0, i1]: adjacent from dim 0, B replaces them.
    make(
        "index_select", "advanced_adjacent", {{{{4, 5, 3}}, index({2, 3}, 4), index({2, 3}, 5)}},
        [](const std::vector<Tensor>& in) { return kiln::index(in[0], {in[1], in[2]}); },
        [](const std::vector<Ref>& r) {
          return ref_index(r[0], cat_shape(r[1].shape, {3}), [&](const Shape& o) {
            const int64_t b = o[0] * 3 + o[1];
            return Shape{static_cast<int64_t>(r[1].v[b]), static_cast<int64_t>(r[2].v[b]), o[2]};
          });
        }),
    // x[:, i1]: B stays in place of dim 1.
    make(
        "index_select", "advanced_after_a_slice", {{{{4, 5, 3}}, index({2, 2}, 5)}},
        [](const std::vector<Tensor>& in) { return kiln::index(in[0], {Tensor(), in[1]}); },
        [](const std::vector<Ref>& r) {
          return ref_index(r[0], {4, 2, 2, 3}, [&](const Shape& o) {
            return Shape{o[0], static_cast<int64_t>(r[1].v[o[1] * 2 + o[2]]), o[3]};
          });
        }),
    // x[i0, :, i2]: indexed dims apart, so B goes first.
    make(
        "index_select", "advanced_apart", {{{{4, 5, 3}}, index({6}, 4), index({6}, 3)}},
        [](const std::vector<Tensor>& in) { return kiln::index(in[0], {in[1], Tensor(), in[2]}); },
        [](const std::vector<Ref>& r) {
          return ref_index(r[0], {6, 5}, [&](const Shape& o) {
            return Shape{static_cast<int64_t>(r[1].v[o[0]]), o[1], static_cast<int64_t>(r[2].v[o[0]])};
          });
        }),
    // x[i0] += v with duplicate rows: index_put(accumulate).
    make(
        "index_add", "index_put_accumulate", {{{{4, 5}}, index({6}, 4), {{6, 5}}}},
        [](const std::vector<Tensor>& in) { return kiln::index_put(in[0], {in[1]}, in[2], true); },
        [](const std::vector<Ref>& r) {
          Ref out = r[0];
          for (int64_t k = 0; k < 6; ++k)
            for (int64_t j = 0; j < 5; ++j) out.v[static_cast<size_t>(r[1].v[k] * 5 + j)] += r[2].v[static_cast<size_t>(k * 5 + j)];
          return out;
        }),
    // x[:, i1] = v: the last duplicate wins.
    make(
        "scatter_reduce", "index_put_replace", {{{{3, 5}}, index({4}, 5), {{3, 4}}}},
        [](const std::vector<Tensor>& in) { return kiln::index_put(in[0], {Tensor(), in[1]}, in[2]); },
        [](const std::vector<Ref>& r) {
          Ref out = r[0];
          for (int64_t a = 0; a < 3; ++a)
            for (int64_t k = 0; k < 4; ++k) out.v[static_cast<size_t>(a * 5 + r[1].v[k])] = r[2].v[static_cast<size_t>(a * 4 + k)];
          return out;
        }),
});

Ref ref_index_select(const Ref& x, const Ref& idx, int64_t dim) {
  Shape out = x.shape;
  if (!out.empty()) out[dim] = idx.numel();
  Ref r{out, std::vector<double>(static_cast<size_t>(numel(out)))};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, out);
    if (!at.empty()) at[dim] = static_cast<int64_t>(idx.v[at[dim]]);
    r.v[i] = x.v[ravel(at, x.shape)];
  }
  return r;
}

Ref ref_index_add(const Ref& x, const Ref& idx, const Ref& src, int64_t dim) {
  Ref r = x;
  for (int64_t i = 0; i < src.numel(); ++i) {
    Shape at = unravel(i, src.shape);
    if (!at.empty()) at[dim] = static_cast<int64_t>(idx.v[at[dim]]);
    r.v[ravel(at, x.shape)] += src.v[i];
  }
  return r;
}

Register index_cases({
    make(
        "index_select", "dim0",
        {{{{5, 4}}, index({7}, 5)}, {{{300, 64}}, index({1000}, 300)}, {{{5, 4}}, index({0}, 5)}},
        [](const std::vector<Tensor>& in) { return kiln::index_select(in[0], 0, in[1]); },
        [](const std::vector<Ref>& r) { return ref_index_select(r[0], r[1], 0); }),
    make(
        "index_select", "middle_and_last", {{{{2, 5, 3}}, index({4}, 5)}, {{{4, 6}}, index({}, 4)}},
        [](const std::vector<Tensor>& in) { return kiln::index_select(in[0], 1, in[1]); },
        [](const std::vector<Ref>& r) { return ref_index_select(r[0], r[1], 1); }),
    make(
        "index_add", "dim0_duplicates",
        {{{{5, 4}}, index({7}, 5), {{7, 4}}}, {{{64, 3000}}, index({100}, 64), {{100, 3000}}}},
        [](const std::vector<Tensor>& in) { return kiln::index_add(in[0], 0, in[1], in[2]); },
        [](const std::vector<Ref>& r) { return ref_index_add(r[0], r[1], r[2], 0); }),
    make(
        "index_add", "last_dim", {{{{3, 6}}, index({4}, 6), {{3, 4}}}, {{{}}, index({1}, 1), {{}}}},
        [](const std::vector<Tensor>& in) { return kiln::index_add(in[0], -1, in[1], in[2]); },
        [](const std::vector<Ref>& r) {
          return ref_index_add(r[0], r[1], r[2],
                               std::max<int64_t>(0, static_cast<int64_t>(r[0].shape.size()) - 1));
        }),
});

Input mask(Shape shape) {
  Input in{std::move(shape), Gen::Bool, kBool};
  in.grad = false;
  return in;
}

Ref ref_triangle(const Ref& x, int64_t diagonal, bool lower) {
  Ref r = x;
  size_t n = x.shape.size();
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, x.shape);
    int64_t off = at[n - 1] - at[n - 2];
    if (lower ? off > diagonal : off < diagonal) r.v[i] = 0;
  }
  return r;
}

// Composites on where: masked_fill, tril, triu.
Register where_composites({
    make(
        "where", "masked_fill_scalar",
        {{{{3, 4}}, mask({3, 4})}, {{{2, 3, 4}}, mask({4})}, {{{0, 4}}, mask({})}},
        [](const std::vector<Tensor>& in) { return kiln::masked_fill(in[0], in[1], 2.0); },
        [](const std::vector<Ref>& r) {
          return ref_map2(r[0], r[1], [](double x, double m) { return m ? 2.0 : x; });
        }),
    make(
        "where", "masked_fill_tensor", {{{{3, 4}}, mask({3, 1}), {{1}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::masked_fill(in[0], in[1], in[2].reshape({}));
        },
        [](const std::vector<Ref>& r) {
          return ref_map3(r[0], r[1], r[2], [](double x, double m, double v) { return m ? v : x; });
        }),
    make(
        "where", "tril", {{{{4, 5}}}, {{{2, 3, 4}}}, {{{5, 3}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::tril(in[0]) + kiln::tril(in[0], -1) * 10;
        },
        [](const std::vector<Ref>& r) {
          return ref_map2(ref_triangle(r[0], 0, true), ref_triangle(r[0], -1, true),
                          [](double a, double b) { return a + 10 * b; });
        }),
    make(
        "where", "triu", {{{{4, 5}}}, {{{2, 3, 4}}}, {{{0, 3}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::triu(in[0], 1) + kiln::triu(in[0], -2) * 10;
        },
        [](const std::vector<Ref>& r) {
          return ref_map2(ref_triangle(r[0], 1, false), ref_triangle(r[0], -2, false),
                          [](double a, double b) { return a + 10 * b; });
        }),
});

// as_strided's gradient: positions of a contiguous input, overlapping windows included.
Ref ref_as_strided(const Ref& x, Shape sizes, Shape strides, int64_t offset) {
  Ref r{sizes, std::vector<double>(static_cast<size_t>(numel(sizes)))};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, sizes);
    int64_t p = offset;
    for (size_t k = 0; k < at.size(); ++k) p += at[k] * strides[k];
    r.v[i] = x.v[p];
  }
  return r;
}

Register as_strided_cases({
    make(
        "as_strided", "overlapping_windows", {{{{10}}}},
        [](const std::vector<Tensor>& in) {
          return in[0].contiguous().as_strided({4, 3}, {2, 1}, 1);
        },
        [](const std::vector<Ref>& r) {
          return ref_as_strided(r[0], {4, 3}, {2, 1}, 1);
        }),
    make(
        "as_strided", "broadcast_and_transpose", {{{{3, 4}}}},
        [](const std::vector<Tensor>& in) {
          return in[0].contiguous().as_strided({2, 4, 3}, {0, 1, 4}, 0);
        },
        [](const std::vector<Ref>& r) {
          return ref_as_strided(r[0], {2, 4, 3}, {0, 1, 4}, 0);
        }),
    make(
        "as_strided", "skips_elements", {{{{4, 5}}}},
        [](const std::vector<Tensor>& in) {
          return in[0].contiguous().as_strided({2, 2}, {10, 3}, 2);
        },
        [](const std::vector<Ref>& r) {
          return ref_as_strided(r[0], {2, 2}, {10, 3}, 2);
        }),
});

// ---- behaviour the table cannot express ----

TEST(Layout, SplitAndChunkShapes) {
  Tensor x = kiln::arange(10).reshape({10, 1});
  auto pieces = kiln::split(x, 4);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].size(0), 2);
  EXPECT_EQ(pieces[1].to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6, 7}));
  // Pieces are views, as in PyTorch.
  EXPECT_TRUE(pieces[1].shares_storage(x));
  // chunk gives fewer pieces when they run out: 5 elements in 4 chunks -> sizes 2, 2, 1.
  auto chunks = kiln::chunk(kiln::arange(5), 4);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[2].to_vector<int64_t>(), (std::vector<int64_t>{4}));
  auto sized = kiln::split(x, {1, 0, 9});
  ASSERT_EQ(sized.size(), 3u);
  EXPECT_EQ(sized[1].size(0), 0);
  EXPECT_EQ(kiln::chunk(kiln::zeros({0}), 3).size(), 3u);
}

TEST(Layout, CatPromotesDtypes) {
  Tensor a = kiln::tensor({1, 2});
  Tensor b = kiln::tensor({0.5}, kFloat64);
  Tensor c = kiln::cat({a, b});
  EXPECT_EQ(c.dtype(), kFloat64);
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{1, 2, 0.5}));
  Tensor d = kiln::cat({kiln::tensor({1}).to(kBool), kiln::tensor({3})});
  EXPECT_EQ(d.dtype(), kInt64);
}

TEST(Layout, CatGradientReachesEveryInput) {
  Tensor a = kiln::ones({2, 2}, kFloat64).requires_grad_();
  Tensor b = kiln::ones({1, 2}, kFloat64).requires_grad_();
  (kiln::cat({a, b}) * kiln::arange(6).reshape({3, 2})).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{4, 5}));
}

TEST(Layout, MaskedFillKeepsDtypeAndTril) {
  Tensor x = kiln::arange(4);
  Tensor m = kiln::tensor({1, 0, 1, 0}).to(kBool);
  Tensor y = kiln::masked_fill(x, m, 2.7);
  EXPECT_EQ(y.dtype(), kInt64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 3}));
  Tensor t = kiln::tril(kiln::ones({3, 3}, kInt64));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(kiln::triu(kiln::ones({2, 3}).to(kBool), 1).to_vector<bool>(),
            (std::vector<bool>{false, true, true, false, false, true}));
}

// The table's "{}" inputs come out 1-D, so 0-d inputs are checked here.
TEST(Layout, ZeroDimInputs) {
  Tensor x = Tensor::scalar(4.0, kFloat64).requires_grad_();
  Tensor i0 = Tensor::scalar(int64_t{0}, kInt64);
  Tensor g = kiln::gather(x, 0, i0);
  EXPECT_EQ(Shape(g.sizes()), Shape{});
  EXPECT_EQ(g.item<double>(), 4.0);
  Tensor s = kiln::scatter_add(x, 0, i0, Tensor::scalar(1.5, kFloat64));
  EXPECT_EQ(s.item<double>(), 5.5);
  Tensor sel = kiln::index_select(x, 0, kiln::tensor({0}));
  EXPECT_EQ(Shape(sel.sizes()), Shape{});
  Tensor add = kiln::index_add(x, 0, kiln::tensor({0}), Tensor::scalar(2.0, kFloat64));
  EXPECT_EQ(add.item<double>(), 6.0);
  (g * 2 + s + sel + add).backward();
  EXPECT_EQ(x.grad().item<double>(), 5.0);
  expect_error([&] { kiln::gather(x, 0, Tensor::scalar(int64_t{1}, kInt64)); },
               {"[gather]", "index 1", "0 <= index < 1"});
  Tensor st = kiln::stack({Tensor::scalar(1.0), Tensor::scalar(2.0)});
  EXPECT_EQ(Shape(st.sizes()), Shape{2});
}

TEST(LayoutErrors, IndexOutOfRangeNamesOpIndexAndRange) {
  Tensor x = kiln::zeros({3, 4});
  Tensor bad = kiln::tensor({0, 5, 1});
  expect_error([&] { kiln::index_select(x, 1, bad); },
               {"[index_select]", "index 5", "dim 1 of size 4", "0 <= index < 4"});
  expect_error([&] { kiln::index_select(x, 0, kiln::tensor({-1})); },
               {"[index_select]", "index -1", "0 <= index < 3"});
  expect_error(
      [&] {
        kiln::index_add(x, 1, bad, kiln::ones({3, 3}));
      },
      {"[index_add]", "index 5", "0 <= index < 4"});
  Tensor g = kiln::full({3, 4}, 7, kInt64);
  expect_error([&] { kiln::gather(x, 0, g); },
               {"[gather]", "index 7", "dim 0 of size 3", "0 <= index < 3"});
  // A big index: the failure happens on a worker thread and must still surface.
  Tensor big = kiln::zeros({2000, 40}, kInt64);
  Tensor big_bad = kiln::cat({big, kiln::full({1, 40}, -3, kInt64)});
  expect_error(
      [&] {
        kiln::gather(kiln::zeros({5, 40}), 0, big_bad);
      },
      {"[gather]", "index -3", "0 <= index < 5"});
  expect_error(
      [&] {
        kiln::scatter_add(kiln::zeros({5, 40}), 0, big_bad, kiln::ones({2001, 40}));
      },
      {"[scatter_add]", "index -3", "0 <= index < 5"});
}

TEST(LayoutErrors, ShapesDtypesAndRanks) {
  Tensor x = kiln::zeros({3, 4});
  expect_error(
      [&] {
        kiln::cat({x, kiln::zeros({3, 5})}, 0);
      },
      {"[cat]", "dim 1", "[3, 5]", "Fix:"});
  expect_error([&] { kiln::cat({x, kiln::zeros({3, 4, 1})}); }, {"[cat]", "rank"});
  expect_error([&] { kiln::cat({Tensor::scalar(1.0)}); }, {"[cat]", "0-d", "stack"});
  expect_error([&] { kiln::cat({}); }, {"[cat]", "non-empty"});
  expect_error([&] { kiln::cat({x}, 2); }, {"[cat]", "dim 2", "out of range"});
  expect_error([&] { kiln::stack({x, kiln::zeros({4, 3})}); }, {"[stack]", "[3, 4]", "[4, 3]"});
  expect_error([&] { kiln::gather(x, 0, kiln::zeros({3}, kInt64)); }, {"[gather]", "rank 2"});
  expect_error([&] { kiln::gather(x, 0, kiln::zeros({2, 5}, kInt64)); }, {"[gather]", "dim 1"});
  expect_error([&] { kiln::gather(x, 0, kiln::zeros({2, 4})); }, {"[gather]", "int64", "Fix:"});
  expect_error(
      [&] {
        kiln::index_select(x, 0, kiln::zeros({2, 2}, kInt64));
      },
      {"[index_select]", "1-D"});
  expect_error(
      [&] {
        kiln::index_add(x, 0, kiln::zeros({2}, kInt64), kiln::ones({3, 4}));
      },
      {"[index_add]", "[2, 4]"});
  expect_error(
      [&] {
        kiln::scatter_add(x, 0, kiln::zeros({4, 4}, kInt64), kiln::ones({3, 4}));
      },
      {"[scatter_add]", "src shape"});
  expect_error(
      [&] {
        kiln::masked_fill(x, kiln::ones({3, 4}), 1.0);
      },
      {"[masked_fill]", "bool mask"});
  expect_error(
      [&] {
        kiln::masked_fill(x, kiln::ones({2, 3, 4}).to(kBool), 1.0);
      },
      {"[masked_fill]", "[2, 3, 4]"});
  expect_error([&] { kiln::tril(kiln::zeros({3})); }, {"[tril]", "at least 2 dims"});
  expect_error([&] { kiln::split(x, {1, 1}); }, {"[split]", "add up to 2", "size 3"});
  expect_error([&] { kiln::split(x, 0); }, {"[split]", "positive"});
  expect_error([&] { kiln::chunk(x, 0); }, {"[chunk]", "positive"});
}

TEST(LayoutErrors, AsStridedBackwardNeedsAContiguousInput) {
  Tensor x = kiln::ones({4, 3}, kFloat64).requires_grad_();
  Tensor y = (x * 2).t().as_strided({2}, {1}, 0);
  expect_error([&] { y.sum().backward(); }, {"[as_strided]", "contiguous", "offset 0", "Fix:"});
  Tensor z = (x * 2).as_strided({2, 2}, {1, 1}, 1);  // fine: overlapping windows
  z.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(),
            (std::vector<double>{0, 2, 4, 2, 0, 0, 0, 0, 0, 0, 0, 0}));
}

// The ops' own checks (what a direct dispatch, e.g. from a trace, hits; the functions
// promote and convert first).
TEST(LayoutErrors, OpLevelChecks) {
  init();
  ops::DimAttrs a;
  Tensor mixed[2] = {kiln::zeros({2}), kiln::zeros({2}, kInt64)};
  expect_error([&] { dispatch(ops::cat, TensorSpan(mixed, 2), a); },
               {"[cat]", "one dtype", "int64"});
  Tensor scatter_in[3] = {kiln::zeros({2}), kiln::zeros({2}, kInt64), kiln::zeros({2}, kFloat64)};
  expect_error([&] { dispatch(ops::scatter_add, TensorSpan(scatter_in, 3), a); },
               {"[scatter_add]", "float64"});
  expect_error([&] { dispatch(ops::index_add, TensorSpan(scatter_in, 3), a); },
               {"[index_add]", "float64"});
  Tensor int32_index[2] = {kiln::zeros({2}), kiln::zeros({2}, kInt32)};
  expect_error([&] { dispatch(ops::index_select, TensorSpan(int32_index, 2), a); },
               {"[index_select]", "int64", "int32"});
  EXPECT_EQ(kiln::index_select(kiln::arange(3), 0, kiln::tensor({2}).to(kInt32)).item<int64_t>(),
            2);
}

TEST(ScatterReduce, FollowsPyTorch) {
  // The examples of torch.Tensor.scatter_reduce_'s documentation.
  const Tensor src = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {6});
  const Tensor index = Tensor::from_vector<int64_t>({0, 1, 0, 1, 2, 1}, {6});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  EXPECT_EQ(scatter_reduce(x, 0, index, src, "sum").to_vector<float>(), (std::vector<float>{5, 14, 8, 4}));
  EXPECT_EQ(scatter_reduce(x, 0, index, src, "sum", false).to_vector<float>(), (std::vector<float>{4, 12, 5, 4}));
  const Tensor y = Tensor::from_vector<float>({5, 4, 3, 2}, {4});
  EXPECT_EQ(scatter_reduce(y, 0, index, src, "amax").to_vector<float>(), (std::vector<float>{5, 6, 5, 2}));
  EXPECT_EQ(scatter_reduce(y, 0, index, src, "amax", false).to_vector<float>(), (std::vector<float>{3, 6, 5, 2}));
  EXPECT_EQ(scatter_reduce(x, 0, index, src, "mean").to_vector<float>(), (std::vector<float>{5.f / 3, 3.5f, 4, 4}));
  // Integer means floor; NaN wins amax.
  const Tensor ints = Tensor::from_vector<int64_t>({0, 0}, {2});
  const Tensor to = Tensor::from_vector<int64_t>({0, 0, 1}, {3});
  const Tensor values = Tensor::from_vector<int64_t>({-3, 0, 5}, {3});
  EXPECT_EQ(scatter_reduce(ints, 0, to, values, "mean", false).to_vector<int64_t>(), (std::vector<int64_t>{-2, 5}));
  EXPECT_EQ(scatter_reduce(ints, 0, to, values, "mean").to_vector<int64_t>(), (std::vector<int64_t>{-1, 2}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = scatter_reduce(Tensor::from_vector<double>({0, 0}, {2}), 0, to,
                                         Tensor::from_vector<double>({1, nan, 2}, {3}), "amax");
  EXPECT_TRUE(std::isnan(with_nan.to_vector<double>()[0]));
  // scatter: the last value in index order wins; bools and a scalar value work too.
  EXPECT_EQ(scatter(x, 0, Tensor::from_vector<int64_t>({0, 0, 3}, {3}), Tensor::from_vector<float>({7, 8, 9}, {3}))
                .to_vector<float>(),
            (std::vector<float>{8, 2, 3, 9}));
  EXPECT_EQ(scatter(zeros({3}, TensorOptions(kBool)), 0, Tensor::from_vector<int64_t>({0, 0, 2}, {3}),
                    Tensor::from_vector<bool>({true, false, true}, {3}))
                .to_vector<bool>(),
            (std::vector<bool>{false, false, true}));
  EXPECT_EQ(scatter(x, 0, Tensor::from_vector<int64_t>({1}, {1}), Scalar(-1)).to_vector<float>(),
            (std::vector<float>{1, -1, 3, 4}));
  // Compiled == eager.
  struct Pooled : nn::Module {
    Tensor segments = register_buffer("segments", Tensor::from_vector<int64_t>({0, 2, 2, 1, 0, 2}, {6, 1}));
    Tensor forward(const Tensor& v) override {
      Tensor at = segments.expand({6, v.size(1)});
      return scatter_reduce(zeros({3, v.size(1)}), 0, at, v, "amax", false) + scatter(zeros({3, v.size(1)}), 0, at, v);
    }
  };
  auto model = std::make_shared<Pooled>();
  const Tensor v = randn({6, 4});
  EXPECT_EQ(compile(model)(v).to_vector<float>(), (*model)(v).to_vector<float>());
}

TEST(ScatterReduce, ProdGradientIsExactAroundZerosAndTiesShareAmaxGradient) {
  const Tensor to = Tensor::from_vector<int64_t>({0, 0, 1}, {3});
  for (bool two_zeros : {false, true}) {
    const Tensor x = Tensor::from_vector<double>({2, 3}, {2}).requires_grad_(true);
    const Tensor src = Tensor::from_vector<double>({0, two_zeros ? 0.0 : 5.0, 4}, {3}).requires_grad_(true);
    scatter_reduce(x, 0, to, src, "prod").sum().backward();
    // Position 0 is 2 * 0 * 5: only the zero sees a nonzero gradient (2 * 5), unless there
    // are two zeros; position 1 is 3 * 4.
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 4}));
    EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{two_zeros ? 0.0 : 10.0, 0, 3}));
  }
  const Tensor x = Tensor::from_vector<double>({1, 0}, {2}).requires_grad_(true);
  const Tensor src = Tensor::from_vector<double>({1, 1, -1}, {3}).requires_grad_(true);
  scatter_reduce(x, 0, to, src, "amax").sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1.0 / 3, 1}));
  EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{1.0 / 3, 1.0 / 3, 0}));
}

TEST(ScatterReduce, BadArgumentsNameTheFix) {
  const Tensor x = zeros({3}), idx = Tensor::from_vector<int64_t>({0, 5}, {2}), src = ones({2});
  expect_error([&] { scatter_reduce(x, 0, idx, src, "max"); },
               {"[scatter_reduce] expected reduce \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\", got \"max\""});
  expect_error([&] { scatter_reduce(x, 0, idx, src, "sum"); }, {"[scatter_reduce] index 5 is out of range for dim 0 of size 3"});
  expect_error([&] { scatter(x, 0, idx, src); }, {"index 5 is out of range for dim 0 of size 3"});
  expect_error([&] { scatter_reduce(zeros({3}, TensorOptions(kBool)), 0, idx, ones({2}, TensorOptions(kBool)), "sum"); },
               {"[scatter_reduce] reduce \"sum\" takes numbers, got a bool tensor"});
  expect_error([&] { scatter(zeros({2, 2}), 0, Tensor::from_vector<int64_t>({0}, {1}), ones({1})); },
               {"[scatter_reduce] expected input, index and src of one rank"});
}

TEST(Indexing, MasksNegativeIndicesAndWrites) {
  const Tensor x = arange(0, 12, 1, TensorOptions(kFloat32)).reshape({3, 4});
  // x[x > 5] and x[mask_over_rows]
  EXPECT_EQ(index(x, {x > 5}).to_vector<float>(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  const Tensor rows = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(index(x, {rows}).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(Shape(index(x, {rows}).sizes()), Shape({2, 4}));
  // Negative positions count from the end; int32 indices work.
  EXPECT_EQ(index(x, {Tensor::from_vector<int64_t>({-1, 0}, {2}), Tensor::from_vector<int32_t>({-4, 3}, {2})})
                .to_vector<float>(),
            (std::vector<float>{8, 3}));
  // x[mask] = v, x[mask] += v, x[idx] = rows of v, in place.
  EXPECT_EQ(index_put(x, {x > 8}, Tensor::scalar(-1.0)).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1}));
  EXPECT_EQ(index_put(x, {x < 2}, Tensor::scalar(10.0), true).to_vector<float>(),
            (std::vector<float>{10, 11, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  Tensor y = x.clone();
  index_put_(y, {Tensor::from_vector<int64_t>({2, 0}, {2})}, Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 4, 5, 6, 7, 1, 2, 3, 4}));
  // A masked value write is a where: it compiles into one graph with no break.
  struct Clip : nn::Module {
    Tensor forward(const Tensor& v) override { return index_put(v, {v > 1}, Tensor::scalar(1.0)); }
  };
  auto clip = std::make_shared<Clip>();
  const Tensor v = randn({5, 3}) * 2;
  EXPECT_EQ(compile(clip, {.fullgraph = true})(v).to_vector<float>(), (*clip)(v).to_vector<float>());
  // Reading through a mask depends on the data: under fullgraph, a graph break naming the line.
  struct Select : nn::Module {
    Tensor forward(const Tensor& v) override { return index(v, {v > 0}); }
  };
  expect_error([&] { compile(std::make_shared<Select>(), {.fullgraph = true})(v); }, {"nonzero", "layout_cases.cpp"});
  // Gradients reach the picked elements, duplicates adding up.
  const Tensor w = randn({4, 2}).requires_grad_(true);
  index(w, {Tensor::from_vector<int64_t>({1, 1, 3}, {3})}).sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 0, 2, 2, 0, 0, 1, 1}));
}

TEST(Indexing, BadIndicesNameTheFix) {
  const Tensor x = zeros({3, 4});
  expect_error([&] { index(x, {Tensor::from_vector<int64_t>({0}, {1}), Tensor::from_vector<int64_t>({4}, {1})}); },
               {"[index] index 4 is out of range for dim 1 of size 4 (expected -4 <= index < 4)"});
  expect_error([&] { index(x, {Tensor::from_vector<int64_t>({-4}, {1})}); },
               {"[index] index -4 is out of range for dim 0 of size 3"});
  expect_error([&] { index(x, {zeros({2})}); }, {"[index] expected int64, int32 or bool index tensors, got float32[2]"});
  expect_error([&] { index(x, {Tensor(), Tensor(), Tensor::from_vector<int64_t>({0}, {1})}); },
               {"[index] too many indices for a tensor of shape [3, 4]"});
  expect_error([&] { index(x, {zeros({3, 5}, TensorOptions(kBool))}); },
               {"[index] the mask's dim 1 has size 5 but x's dim 1 has size 4"});
  expect_error([&] { index(x, {Tensor()}); }, {"[index] expected at least one index tensor"});
  expect_error([&] { index(x, {Tensor::from_vector<int64_t>({0, 1}, {2}), Tensor::from_vector<int64_t>({0, 1, 2}, {3})}); },
               {"[index] shapes [2] and [3] cannot be broadcast"});
  expect_error([&] { index_put(x, {Tensor::from_vector<int64_t>({0}, {1})}, zeros({5})); }, {"expand"});
}

}  // namespace
}  // namespace kiln::testing
