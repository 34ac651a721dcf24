// OpCases for sort, topk, cumsum, cumprod and searchsorted (and the functions built on them:
// argsort, msort, kthvalue, bucketize), and the behaviours the harness does not reach: NaN's place, stability, the
// dtypes of running sums, and cumprod's gradient where the input holds zeros.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "harness.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using Line = std::vector<double>;
using LineFn = std::function<Line(const Line&)>;

// `f` applied to every line of `a` along `dim`; the lines it returns may have another length.
Ref ref_lines(const Ref& a, int64_t dim, const LineFn& f) {
  if (a.shape.empty()) {
    const Line out = f(a.v);
    return Ref{{}, out};
  }
  const size_t d = static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(a.shape.size()) : dim);
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= a.shape[k];
  for (size_t k = d + 1; k < a.shape.size(); ++k) inner *= a.shape[k];
  const int64_t n = a.shape[d];
  Ref out{a.shape, {}};
  std::vector<Line> lines;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      Line line;
      for (int64_t i = 0; i < n; ++i) line.push_back(a.v[static_cast<size_t>((o * n + i) * inner + j)]);
      lines.push_back(f(line));
    }
  const int64_t m = lines.empty() ? 0 : static_cast<int64_t>(lines[0].size());
  out.shape[d] = m;
  out.v.assign(static_cast<size_t>(outer * m * inner), 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j)
      for (int64_t i = 0; i < m; ++i)
        out.v[static_cast<size_t>((o * m + i) * inner + j)] = lines[static_cast<size_t>(o * inner + j)][static_cast<size_t>(i)];
  return out;
}

// The positions of a line in kiln's order: a stable sort with NaN above every number.
std::vector<size_t> stable_order(const Line& line, bool descending) {
  std::vector<size_t> order(line.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto below = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    return descending ? below(line[j], line[i]) : below(line[i], line[j]);
  });
  return order;
}

// The first k of each line in order: their values, or their positions when `positions`.
LineFn first_in_order(int64_t k, bool descending, bool positions) {
  return [=](const Line& line) {
    const std::vector<size_t> order = stable_order(line, descending);
    Line out;
    for (int64_t i = 0; i < (k < 0 ? static_cast<int64_t>(line.size()) : k); ++i)
      out.push_back(positions ? static_cast<double>(order[static_cast<size_t>(i)]) : line[order[static_cast<size_t>(i)]]);
    return out;
  };
}

LineFn running(bool product) {
  return [=](const Line& line) {
    Line out;
    double acc = product ? 1 : 0;
    for (double v : line) out.push_back(acc = product ? acc * v : acc + v);
    return out;
  };
}

const std::vector<DType> kEveryNumber = {kFloat32, kFloat64, kInt32, kInt64};

OpCase make(std::string op, std::string label, std::vector<std::vector<Input>> runs, Fn fn,
            std::function<Ref(const std::vector<Ref>&)> ref, std::vector<DType> dtypes = kEveryNumber) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  c.dtypes = std::move(dtypes);
  return c;
}

// Index outputs: integers, compared exactly; ties (Gen::Int) test that equal values keep
// their order.
OpCase positions(OpCase c) {
  c.gradcheck = false;
  c.output_dtype = kInt64;
  return c;
}

// An empty result: values are checked, there is nothing to gradcheck.
OpCase nothing_to_differentiate(OpCase c) {
  c.gradcheck = false;
  return c;
}

const std::vector<std::vector<Input>> kLineRuns = {{{{5, 7}}}, {{{4, 6, 3}}}, {{{9}}}, {{{3, 100}}}};
const std::vector<std::vector<Input>> kTiedRuns = {{{{5, 7}, Gen::Int}}, {{{4, 6, 3}, Gen::Int}}, {{{3, 100}, Gen::Int}}};

Register sort_cases({
    make("sort", "ascending_last_dim", kLineRuns, [](const std::vector<Tensor>& in) { return sort(in[0]).values; },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], -1, first_in_order(-1, false, false)); }),
    make("sort", "descending_dim0", kLineRuns,
         [](const std::vector<Tensor>& in) { return sort(in[0], 0, /*descending=*/true).values; },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], 0, first_in_order(-1, true, false)); }),
    positions(make("sort", "argsort_ties", kTiedRuns, [](const std::vector<Tensor>& in) { return argsort(in[0], 0); },
                   [](const std::vector<Ref>& r) { return ref_lines(r[0], 0, first_in_order(-1, false, true)); })),
    positions(make("sort", "argsort_descending_ties", kTiedRuns,
                   [](const std::vector<Tensor>& in) { return argsort(in[0], -1, /*descending=*/true); },
                   [](const std::vector<Ref>& r) { return ref_lines(r[0], -1, first_in_order(-1, true, true)); })),
    make("sort", "msort", {{{{6, 4}}}}, [](const std::vector<Tensor>& in) { return msort(in[0]); },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], 0, first_in_order(-1, false, false)); }),
    make("sort", "scalar", {{{{}}}}, [](const std::vector<Tensor>& in) { return sort(in[0]).values; },
         [](const std::vector<Ref>& r) { return r[0]; }),
    make("topk", "largest", kLineRuns, [](const std::vector<Tensor>& in) { return topk(in[0], 3).values; },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], -1, first_in_order(3, true, false)); }),
    make("topk", "smallest_dim1", {{{{4, 6, 3}}}, {{{2, 9}}}},
         [](const std::vector<Tensor>& in) { return topk(in[0], 2, 1, /*largest=*/false).values; },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], 1, first_in_order(2, false, false)); }),
    positions(make("topk", "indices_ties", kTiedRuns, [](const std::vector<Tensor>& in) { return topk(in[0], 4, 1).indices; },
                   [](const std::vector<Ref>& r) { return ref_lines(r[0], 1, first_in_order(4, true, true)); })),
    make("topk", "kthvalue", {{{{5, 7}}}, {{{4, 6, 3}}}},
         [](const std::vector<Tensor>& in) { return kthvalue(in[0], 2, 0, /*keepdim=*/true).values; },
         [](const std::vector<Ref>& r) {
           return ref_lines(r[0], 0, [](const Line& line) { return Line{first_in_order(2, false, false)(line)[1]}; });
         }),
    nothing_to_differentiate(make("topk", "none", {{{{4, 5}}}}, [](const std::vector<Tensor>& in) { return topk(in[0], 0).values; },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], -1, first_in_order(0, true, false)); })),
});

Register cumulative_cases({
    make("cumsum", "last_dim", kLineRuns, [](const std::vector<Tensor>& in) { return cumsum(in[0], -1); },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], -1, running(false)); }),
    make("cumsum", "dim0", kLineRuns, [](const std::vector<Tensor>& in) { return cumsum(in[0], 0); },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], 0, running(false)); }),
    make("cumsum", "scalar", {{{{}}}}, [](const std::vector<Tensor>& in) { return cumsum(in[0], 0); },
         [](const std::vector<Ref>& r) { return r[0]; }),
    make("cumprod", "last_dim", {{{{5, 7}}}, {{{4, 6, 3}}}, {{{9}}}},
         [](const std::vector<Tensor>& in) { return cumprod(in[0], -1); },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], -1, running(true)); }),
    make("cumprod", "dim1", {{{{4, 6, 3}}}}, [](const std::vector<Tensor>& in) { return cumprod(in[0], 1); },
         [](const std::vector<Ref>& r) { return ref_lines(r[0], 1, running(true)); }),
});

// searchsorted's answer for each value of `values` in its line of `sequence` ([..., M] with
// values [..., N], or a 1-D sequence for values of any shape): the count of the line's
// elements below the value (left) or not above it (right). Counting needs no sorted line.
Ref count_below(const Ref& sequence, const Ref& values, bool right) {
  const size_t m = sequence.shape.empty() ? 1 : static_cast<size_t>(sequence.shape.back());
  const bool shared = sequence.shape.size() == 1;
  const size_t n = values.shape.empty() ? 1 : static_cast<size_t>(values.shape.back());
  Ref out{values.shape, {}};
  for (size_t e = 0; e < values.v.size(); ++e) {
    const size_t line = shared ? 0 : e / n;
    double count = 0;
    for (size_t i = 0; i < m; ++i) {
      const double s = sequence.v[line * m + i];
      count += right ? s <= values.v[e] : s < values.v[e];
    }
    out.v.push_back(count);
  }
  return out;
}

// The harness's inputs are random: the sequence is sorted first (sort is covered above).
Fn search(bool right) {
  return [=](const std::vector<Tensor>& in) { return searchsorted(sort(in[0]).values, in[1], false, right); };
}

Register searchsorted_cases({
    positions(make("searchsorted", "left_1d",
                   {{{{7}, Gen::Int}, {{3, 4}, Gen::Int}}, {{{1}, Gen::Int}, {{5}, Gen::Int}}, {{{20}}, {{2, 3, 2}}},
                    {{{6}}, {{}}}},
                   search(false), [](const std::vector<Ref>& r) { return count_below(r[0], r[1], false); })),
    positions(make("searchsorted", "right_1d", {{{{7}, Gen::Int}, {{3, 4}, Gen::Int}}, {{{9}}, {{4, 5}}}},
                   search(true), [](const std::vector<Ref>& r) { return count_below(r[0], r[1], true); })),
    positions(make("searchsorted", "rows", {{{{3, 6}, Gen::Int}, {{3, 4}, Gen::Int}}, {{{2, 2, 5}}, {{2, 2, 3}}}},
                   search(false), [](const std::vector<Ref>& r) { return count_below(r[0], r[1], false); })),
    positions(make("searchsorted", "rows_right", {{{{3, 6}, Gen::Int}, {{3, 4}, Gen::Int}}},
                   search(true), [](const std::vector<Ref>& r) { return count_below(r[0], r[1], true); })),
    positions(make("searchsorted", "bucketize_right", {{{{8}, Gen::Int}, {{4, 6}, Gen::Int}}, {{{5}}, {{3, 3}}}},
                   [](const std::vector<Tensor>& in) { return bucketize(in[1], sort(in[0]).values, false, true); },
                   [](const std::vector<Ref>& r) { return count_below(r[0], r[1], true); })),
});

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(SearchSorted, FollowsPyTorch) {
  const Tensor boundaries = Tensor::from_vector<float>({1, 3, 5, 7, 9}, {5});
  const Tensor v = Tensor::from_vector<float>({3, 6, 9, 0, 10}, {5});
  // torch.searchsorted and torch.bucketize on the same numbers.
  EXPECT_EQ(searchsorted(boundaries, v).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 4, 0, 5}));
  EXPECT_EQ(searchsorted(boundaries, v, false, true).to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 5, 0, 5}));
  EXPECT_EQ(searchsorted(boundaries, v, false, false, "right").to_vector<int64_t>(),
            (std::vector<int64_t>{2, 3, 5, 0, 5}));
  EXPECT_EQ(bucketize(v, boundaries).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 4, 0, 5}));
  const Tensor as_int32 = bucketize(v, boundaries, /*out_int32=*/true, /*right=*/true);
  EXPECT_EQ(as_int32.dtype(), kInt32);
  EXPECT_EQ(as_int32.to_vector<int32_t>(), (std::vector<int32_t>{2, 3, 5, 0, 5}));
  // A scalar value, integer values against float boundaries (promoted), and a sorter.
  EXPECT_EQ(searchsorted(boundaries, Scalar(4)).item<int64_t>(), 2);
  EXPECT_EQ(bucketize(Tensor::from_vector<int64_t>({2, 8}, {2}), boundaries).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 4}));
  const Tensor shuffled = Tensor::from_vector<float>({7, 1, 9, 3, 5}, {5});
  EXPECT_EQ(searchsorted(shuffled, v, false, false, "", argsort(shuffled)).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 3, 4, 0, 5}));
  // NaN ranks above every number, as sort puts it last.
  const Tensor with_nan = Tensor::from_vector<double>({1, 2, kNaN}, {3});
  EXPECT_EQ(searchsorted(with_nan, Tensor::from_vector<double>({kNaN, 5}, {2})).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(searchsorted(with_nan, Tensor::from_vector<double>({kNaN}, {1}), false, true).to_vector<int64_t>(),
            (std::vector<int64_t>{3}));
  // Compiled == eager.
  struct Buckets : nn::Module {
    Tensor edges = register_buffer("edges", Tensor::from_vector<float>({-1, 0, 1}, {3}));
    Tensor forward(const Tensor& x) override { return bucketize(x, edges); }
  };
  auto model = std::make_shared<Buckets>();
  Tensor x = randn({4, 5});
  EXPECT_EQ(compile(model)(x).to_vector<int64_t>(), (*model)(x).to_vector<int64_t>());
}

TEST(SearchSorted, BadArgumentsNameTheFix) {
  const Tensor seq = zeros({2, 3});
  expect_error([&] { searchsorted(seq, zeros({3, 4})); },
               {"[searchsorted] a sorted sequence of shape [2, 3] searches values with the same leading dims",
                "got values of shape [3, 4]"});
  expect_error([&] { searchsorted(zeros({}), zeros({2})); },
               {"[searchsorted] expected a sorted sequence with at least one dim"});
  expect_error([&] { searchsorted(zeros({3}), zeros({2}), false, true, "left"); },
               {"side = \"left\" contradicts right = true"});
  expect_error([&] { searchsorted(zeros({3}), zeros({2}), false, false, "middle"); },
               {"expected side \"left\" or \"right\", got \"middle\""});
  expect_error([&] { searchsorted(zeros({3}), zeros({2}), false, false, "", zeros({3})); },
               {"expected the sorter to be int64 and shaped like the sorted sequence"});
  expect_error([&] { bucketize(zeros({2}), seq); }, {"[bucketize] expected 1-D boundaries, got float32[2, 3]"});
  expect_error([&] { searchsorted(Tensor::from_vector<bool>({true}, {1}), Tensor::from_vector<bool>({true}, {1})); },
               {"[searchsorted] expected the sorted sequence and the values to have one numeric dtype"});
}

// torch.histc's numbers, including its range from the data and for constant data.
TEST(Histc, FollowsPyTorch) {
  auto counts = [](const Tensor& t) { return t.to_vector<double>(); };
  using V = std::vector<double>;
  EXPECT_EQ(counts(histc(Tensor::from_vector<float>({1, 2, 1}, {3}), 4, 0, 3)), (V{0, 2, 1, 0}));
  EXPECT_EQ(counts(histc(Tensor::from_vector<float>({0, 0.5, 2.9, 3, -1, 4, 1.5}, {7}), 3, 0, 3)),
            (V{2, 1, 2}));
  EXPECT_EQ(counts(histc(Tensor::from_vector<float>({2, 5, 3, 3, 9}, {5}), 4)), (V{3, 1, 0, 1}));
  EXPECT_EQ(counts(histc(Tensor::from_vector<float>({7, 7, 7}, {3}), 4)), (V{0, 0, 3, 0}));
  Tensor f64 = histc(Tensor::from_vector<double>({0.1, 0.2, 0.3}, {3}), 3, 0.1, 0.3);
  EXPECT_EQ(f64.dtype(), kFloat64);
  EXPECT_EQ(counts(f64), (V{1, 1, 1}));
  EXPECT_EQ(counts(histc(Tensor::from_vector<float>({1, kNaN, 2}, {3}), 2, 0, 2)), (V{0, 2}));
  // Against counting by hand, on a matrix (histc flattens it).
  Tensor x = randn({40, 25});
  std::vector<double> want(10, 0);
  for (float v : x.to_vector<float>())  // in float32, as kiln computes the bin
    if (v >= -1.5f && v <= 2.f) want[std::min<size_t>(9, static_cast<size_t>((v + 1.5f) * 10.f / 3.5f))] += 1;
  EXPECT_EQ(counts(histc(x, 10, -1.5, 2)), want);
  expect_error([] { histc(Tensor::from_vector<float>({1, kNaN}, {2}), 3); },
               {"[histc] the range [nan, nan] is not finite"});
  expect_error([] { histc(zeros({3}), 0); }, {"[histc] expected bins > 0, got 0"});
  expect_error([] { histc(zeros({3}), 5, 2, 1); }, {"[histc] expected min <= max, got min=2, max=1"});
  expect_error([] { histc(zeros({3}, kInt64), 5); }, {"[histc] expected a floating tensor, got int64[3]"});
}

TEST(Sort, NanRanksAboveEveryNumberAndTiesKeepTheirOrder) {
  const Tensor x = Tensor::from_vector<double>({3, kNaN, 1, kNaN, 1, -kNaN, 2}, {7});
  auto [up, up_at] = sort(x);
  EXPECT_EQ(up_at.to_vector<int64_t>(), (std::vector<int64_t>{2, 4, 6, 0, 1, 3, 5}));
  auto [down, down_at] = sort(x, 0, /*descending=*/true);
  EXPECT_EQ(down_at.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 5, 0, 6, 2, 4}));
  const std::vector<double> v = down.to_vector<double>();
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[2]));
  EXPECT_EQ(v[3], 3);
  EXPECT_EQ(topk(x, 2, 0).indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(topk(x, 2, 0, /*largest=*/false).indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 4}));
}

TEST(Sort, GradientReachesThePositionsTheIndicesName) {
  const Tensor x = Tensor::from_vector<double>({0.5, -1, 2, 0.25, 3, -2}, {2, 3}).requires_grad_(true);
  auto [values, indices] = topk(x, 2, 1);
  (values * Tensor::from_vector<double>({10, 1, 100, 7}, {2, 2})).sum().backward();
  // Row 0: 2 (position 2) then 0.5 (0); row 1: 3 (1) then 0.25 (0).
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 10, 7, 100, 0}));
}

TEST(Sort, BadArgumentsNameTheFix) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { topk(x, 4); }, {"[topk] expected 0 <= k <= 3", "got k = 4"});
  expect_error([&] { kthvalue(x, 0, 1); }, {"[kthvalue] expected 1 <= k <= 3", "k counts from 1"});
  expect_error([&] { sort(x, 2); }, {"sort", "dim"});
  expect_error([&] { sort(x.to(kFloat16)); }, {"[sort]", "storage-only"});
}

TEST(Cumulative, IntegersAndBoolsSumInInt64UnlessADtypeIsGiven) {
  const Tensor i32 = Tensor::from_vector<int32_t>({2000000000, 2000000000, -5}, {3});
  const Tensor sums = cumsum(i32, 0);
  EXPECT_EQ(sums.dtype(), kInt64);
  EXPECT_EQ(sums.to_vector<int64_t>(), (std::vector<int64_t>{2000000000, 4000000000, 3999999995}));
  const Tensor flags = Tensor::from_vector<bool>({true, false, true, true}, {4});
  EXPECT_EQ(cumsum(flags, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(cumprod(i32, 0, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(cumsum(flags, 0, kFloat32).to_vector<float>(), (std::vector<float>{1, 1, 2, 3}));
}

TEST(Cumulative, CumprodGradientIsExactWhereTheInputHoldsZeros) {
  // Lines without a zero, with one, with two, and starting with one.
  const std::vector<double> values = {2, -1.5, 3, 0.5, 2, 0, 3, -1, 0.5, 0, 2, 0, 0, 4, 1.5, -2};
  const Tensor x = Tensor::from_vector<double>(values, {4, 4}).requires_grad_(true);
  const Tensor w = Tensor::from_vector<double>({1, -2, 0.5, 3, 2, 1, -1, 0.25, 1, 1, 1, 1, -3, 2, 0.5, 1}, {4, 4});
  const Tensor analytic = grad({(cumprod(x, 1) * w).sum()}, {x})[0];
  // The product is a polynomial in each entry: central differences are exact up to rounding.
  std::vector<double> numeric(values.size());
  for (size_t e = 0; e < values.size(); ++e) {
    double loss[2];
    for (int s = 0; s < 2; ++s) {
      std::vector<double> shifted = values;
      shifted[e] += s == 0 ? 1e-4 : -1e-4;
      loss[s] = (cumprod(Tensor::from_vector<double>(shifted, {4, 4}), 1) * w).sum().item<double>();
    }
    numeric[e] = (loss[0] - loss[1]) / 2e-4;
  }
  const std::vector<double> got = analytic.to_vector<double>();
  for (size_t e = 0; e < got.size(); ++e) EXPECT_NEAR(got[e], numeric[e], 1e-8) << "element " << e;
  for (double g : got) EXPECT_TRUE(std::isfinite(g));
}

}  // namespace
}  // namespace kiln::testing
