// OpCases for the layout ops (cat, gather, scatter_add, index_select, index_add), the
// composites built on them (stack, split, chunk, masked_fill, tril, triu), as_strided's
// gradient, and the layout errors.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln::testing
