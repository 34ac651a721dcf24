// OpCases for masked_select and nonzero with a size bound (the form that stays inside a
// compiled graph), and tests of what the harness cannot reach: the data-dependent sizes
// eagerly, the graph break (or its error under fullgraph) when compiled without a bound, and
// unique.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// x's elements where the mask is true (both broadcast), padded with `fill` or cut to `size`.
Ref ref_masked_select(const Ref& x, const Ref& mask, int64_t size, double fill) {
  const Ref xs = ref_map2(x, mask, [](double a, double) { return a; });
  const Ref ms = ref_map2(x, mask, [](double, double b) { return b; });
  Ref out{{size}, std::vector<double>(static_cast<size_t>(size), fill)};
  size_t k = 0;
  for (size_t e = 0; e < xs.v.size() && k < out.v.size(); ++e)
    if (ms.v[e] != 0) out.v[k++] = xs.v[e];
  return out;
}

Ref ref_nonzero(const Ref& x, int64_t size, double fill) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  Ref out{{size, rank}, std::vector<double>(static_cast<size_t>(size * rank), fill)};
  int64_t k = 0;
  for (int64_t e = 0; e < x.numel() && k < size; ++e) {
    if (x.v[static_cast<size_t>(e)] == 0) continue;
    for (int64_t d = rank, rest = e; d-- > 0;) {
      out.v[static_cast<size_t>(k * rank + d)] = static_cast<double>(rest % x.shape[static_cast<size_t>(d)]);
      rest /= x.shape[static_cast<size_t>(d)];
    }
    ++k;
  }
  return out;
}

OpCase masked_select_case(std::string label, std::vector<std::vector<Input>> runs, int64_t size) {
  OpCase c;
  c.op = "masked_select";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.dtypes = {kFloat32, kFloat64, kInt32, kInt64};
  c.fn = [size](const std::vector<Tensor>& in) { return masked_select(in[0], in[1], size, -1.0); };
  c.ref = [size](const std::vector<Ref>& r) { return ref_masked_select(r[0], r[1], size, -1.0); };
  return c;
}

OpCase nonzero_case(std::string label, std::vector<std::vector<Input>> runs, int64_t size) {
  OpCase c;
  c.op = "nonzero";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.dtypes = {kFloat32, kFloat64, kInt32, kInt64, kBool};
  c.fn = [size](const std::vector<Tensor>& in) { return nonzero(in[0], size, -1); };
  c.ref = [size](const std::vector<Ref>& r) { return ref_nonzero(r[0], size, -1); };
  c.gradcheck = false;
  c.output_dtype = kInt64;
  return c;
}

// Size 0: values are checked, there is nothing to gradcheck.
OpCase empty_result(OpCase c) {
  c.gradcheck = false;
  return c;
}

Input mask(Shape shape) {
  return Input{std::move(shape), Gen::Bool, kBool, 0, /*grad=*/false};
}

Register selection_cases({
    // 20 elements, about 10 selected: size 6 cuts, size 16 pads.
    masked_select_case("cut", {{{{4, 5}}, mask({4, 5})}, {{{3, 4}}, mask({4})}}, 6),
    masked_select_case("padded", {{{{4, 5}}, mask({4, 5})}, {{{2, 3, 4}}, mask({3, 1})}}, 16),
    empty_result(masked_select_case("none", {{{{4, 5}}, mask({4, 5})}}, 0)),
    nonzero_case("cut", {{{{4, 5}, Gen::Bool}}, {{{2, 3, 4}, Gen::Bool}}}, 5),
    nonzero_case("padded", {{{{4, 5}, Gen::Bool}}, {{{9}, Gen::Bool}}}, 15),
});

}  // namespace

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Selection, EagerSizesComeFromTheData) {
  const Tensor x = Tensor::from_vector<double>({1, -2, 3, 0, -5, 6}, {2, 3});
  EXPECT_EQ(masked_select(x, x > 0).to_vector<double>(), (std::vector<double>{1, 3, 6}));
  // The mask broadcasts: row mask [true, false, true] over both rows.
  const Tensor row = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(masked_select(x, row).to_vector<double>(), (std::vector<double>{1, 3, 0, 6}));
  EXPECT_EQ(nonzero(x).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 0, 2, 1, 1, 1, 2}));
  EXPECT_EQ(Shape(argwhere(zeros({2, 2})).sizes()), Shape({0, 2}));
  EXPECT_EQ(nonzero(Tensor::from_vector<double>({0, kNaN}, {2})).to_vector<int64_t>(), (std::vector<int64_t>{1}));
  expect_error([&] { masked_select(x, x); }, {"[masked_select] expected a bool mask", "Fix:"});
}

TEST(Selection, MaskedSelectGradientGoesToTheSelectedElements) {
  const Tensor x = Tensor::from_vector<double>({1, -2, 3, 4}, {2, 2}).requires_grad_(true);
  const Tensor y = masked_select(x, x > 0, 2);  // [1, 3]: 4 is cut
  (y * Tensor::from_vector<double>({10, 20}, {2})).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{10, 0, 20, 0}));
}

TEST(Selection, UniqueSortsAndCounts) {
  const Tensor x = Tensor::from_vector<double>({3, 1, 2, 3, 1, 3, kNaN, kNaN}, {2, 4});
  auto [values, inverse, counts] = unique(x);
  const std::vector<double> v = values.to_vector<double>();
  ASSERT_EQ(v.size(), 5u);  // 1, 2, 3 and each NaN on its own
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 3), (std::vector<double>{1, 2, 3}));
  EXPECT_TRUE(std::isnan(v[3]) && std::isnan(v[4]));
  EXPECT_EQ(inverse.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 2, 0, 2, 3, 4}));
  EXPECT_EQ(Shape(inverse.sizes()), Shape({2, 4}));
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 3, 1, 1}));
  auto [none, none_inverse, none_counts] = unique(zeros({0}));
  EXPECT_EQ(none.numel(), 0);
}

struct PositiveParts : nn::Module {
  std::optional<int64_t> bound;
  Tensor forward(const Tensor& x) override { return masked_select(x, x > 0, bound) * 2; }
};

TEST(Selection, CompiledWithoutABoundBreaksTheGraphAndSaysSo) {
  const Tensor x = Tensor::from_vector<float>({1, -2, 3, -4, 5, 6}, {2, 3});
  auto model = std::make_shared<PositiveParts>();
  auto strict = kiln::compile(model, {.fullgraph = true});
  expect_error([&] { strict(x); }, {"[masked_select] the length of its result depends on the data",
                                    "pass size = an upper bound", "graph break"});
  // Without fullgraph the forward splits at the count and still gives the eager result.
  auto split = kiln::compile(model);
  EXPECT_EQ(split(x).to_vector<float>(), (std::vector<float>{2, 6, 10, 12}));
  // With a bound it stays one graph, even under fullgraph: padded with 0.
  model->bound = 6;
  auto bounded = kiln::compile(model, {.fullgraph = true});
  EXPECT_EQ(bounded(x).to_vector<float>(), (std::vector<float>{2, 6, 10, 12, 0, 0}));
}

}  // namespace
}  // namespace kiln::testing
