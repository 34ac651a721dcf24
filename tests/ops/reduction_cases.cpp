// OpCases for the reductions (prod, amax/amin, max_dim/min_dim, all/any, var, norm and the
// composites mean, std, logsumexp, argmax/argmin), plus their edge cases and errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <limits>

#include "harness.h"
#include "kiln/ops/reduction.h"

namespace kiln::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using RefFn = std::function<Ref(const std::vector<Ref>&)>;
using Runs = std::vector<std::vector<Input>>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

OpCase make(std::string op, std::string label, Runs runs, Fn fn, RefFn ref,
            std::vector<DType> dtypes = {kFloat32, kFloat64}) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  c.dtypes = std::move(dtypes);
  c.f32_tol = 1e-4;
  return c;
}

OpCase no_grad(OpCase c) {
  c.gradcheck = false;
  return c;
}

OpCase with_output(OpCase c, DType d) {
  c.output_dtype = d;
  return c;
}

// ---- naive references over one group of reduced values ----

double ref_prod(const std::vector<double>& v) {
  double p = 1;
  for (double x : v) p *= x;
  return p;
}
double ref_max(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    if (x > m) m = x;
  }
  return m;
}
double ref_min(const std::vector<double>& v) {
  double m = kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    if (x < m) m = x;
  }
  return m;
}
// Index of the first max/min (first nan wins).
double ref_arg(const std::vector<double>& v, bool is_max) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[i]) || (is_max ? v[i] > v[best] : v[i] < v[best])) best = i;
  }
  return static_cast<double>(best);
}
double ref_var(const std::vector<double>& v, double correction) {
  double n = static_cast<double>(v.size()), mean = 0, ss = 0;
  for (double x : v) mean += x;
  mean /= n;
  for (double x : v) ss += (x - mean) * (x - mean);
  return ss / std::max(0.0, n - correction);
}
double ref_norm(const std::vector<double>& v, double p) {
  if (std::isinf(p)) {
    double m = p > 0 ? 0 : kInf;
    for (double x : v) m = p > 0 ? std::max(m, std::fabs(x)) : std::min(m, std::fabs(x));
    return m;
  }
  double s = 0;
  for (double x : v) s += p == 0 ? (x != 0) : std::pow(std::fabs(x), p);
  return p == 0 ? s : std::pow(s, 1 / p);
}
double ref_logsumexp(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::exp(x);  // inputs stay small in these cases
  return std::log(s);
}

RefFn reduce_ref(Shape dims, bool keepdim, std::function<double(const std::vector<double>&)> f) {
  return [=](const std::vector<Ref>& r) { return ref_reduce(r[0], dims, keepdim, f); };
}

Register prod_cases({
    make(
        "prod", "all",
        {{{{3, 4}}}, {{{}}}, {{{0, 3}}}, {{{2, 3, 5}, Gen::Unit}}, {{{64, 80}, Gen::NonZero}}},
        [](const std::vector<Tensor>& in) { return in[0].prod(); },
        reduce_ref({}, false, ref_prod)),
    make(
        "prod", "dims_keepdim", {{{{3, 4, 5}}}, {{{2, 0, 3}}}},
        [](const std::vector<Tensor>& in) {
          return in[0].prod({0, 2}, true);
        },
        reduce_ref({0, 2}, true, ref_prod)),
    make(
        "prod", "inner", {{{{4, 6}}}, {{{300, 40}, Gen::NonZero}}},
        [](const std::vector<Tensor>& in) { return kiln::prod(in[0], {-1}); },
        reduce_ref({-1}, false, ref_prod)),
    // Integer-valued inputs put exact zeros in most rows: 0, 1 and 2+ zeros per group.
    make(
        "prod", "with_zeros", {{{{8, 3}, Gen::Int}}, {{{5, 4}, Gen::Int}}},
        [](const std::vector<Tensor>& in) { return in[0].prod({1}); },
        reduce_ref({1}, false, ref_prod)),
    with_output(no_grad(make("prod", "int", {{{{3, 4}, Gen::Int}}, {{{2, 5}, Gen::Bool, kBool}}},
                             [](const std::vector<Tensor>& in) { return in[0].prod({0}); },
                             reduce_ref({0}, false, ref_prod), {kInt64})),
                kInt64),
});

Register extreme_cases({
    make("amax", "all", {{{{3, 4}}}, {{{}}}, {{{2, 3, 5}}}, {{{256, 160}}}},
         [](const std::vector<Tensor>& in) { return in[0].amax(); }, reduce_ref({}, false, ref_max),
         {kFloat32, kFloat64, kInt64}),
    make("amax", "inner_rows", {{{{64, 700}}}, {{{3, 1}}}},
         [](const std::vector<Tensor>& in) { return kiln::amax(in[0], {1}); },
         reduce_ref({1}, false, ref_max), {kFloat32, kFloat64, kInt64}),
    make("amax", "dims", {{{{3, 4, 5}}}, {{{0, 4, 5}}}},
         [](const std::vector<Tensor>& in) {
           return kiln::amax(in[0], {1, 2}, true);
         },
         reduce_ref({1, 2}, true, ref_max), {kFloat32, kFloat64, kInt32}),
    make(
        "amax", "outer", {{{{700, 64}}}, {{{5, 3}}}},
        [](const std::vector<Tensor>& in) { return in[0].amax({0}); },
        reduce_ref({0}, false, ref_max)),
    with_output(no_grad(make("amax", "bool", {{{{4, 3}, Gen::Bool, kBool}}},
                             [](const std::vector<Tensor>& in) { return in[0].amax({1}); },
                             reduce_ref({1}, false, ref_max), {kBool})),
                kBool),
    make("amin", "all", {{{{3, 4}}}, {{{}}}, {{{2, 3, 5}}}, {{{256, 160}}}},
         [](const std::vector<Tensor>& in) { return in[0].amin(); }, reduce_ref({}, false, ref_min),
         {kFloat32, kFloat64, kInt64}),
    make(
        "amin", "dims", {{{{3, 4, 5}}}, {{{3, 0, 5}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::amin(in[0], {0, 2});
        },
        reduce_ref({0, 2}, false, ref_min)),
    make(
        "amax", "max_all_composite", {{{{3, 4}}}, {{{}}}},
        [](const std::vector<Tensor>& in) { return in[0].max(); }, reduce_ref({}, false, ref_max)),
    make(
        "amin", "min_all_composite", {{{{3, 4}}}, {{{}}}},
        [](const std::vector<Tensor>& in) { return kiln::min(in[0]); },
        reduce_ref({}, false, ref_min)),
});

RefFn arg_ref(Shape dims, bool keepdim, bool is_max) {
  return reduce_ref(dims, keepdim,
                    [is_max](const std::vector<double>& v) { return ref_arg(v, is_max); });
}

Register dim_extreme_cases({
    make("max_dim", "values", {{{{3, 4}}}, {{{256, 160}}}, {{{2, 700}}}},
         [](const std::vector<Tensor>& in) { return std::get<0>(kiln::max(in[0], 1)); },
         reduce_ref({1}, false, ref_max), {kFloat32, kFloat64, kInt64}),
    make(
        "max_dim", "values_outer_keepdim", {{{{5, 3, 4}}}, {{{300, 130}}}, {{{}}}},
        [](const std::vector<Tensor>& in) { return std::get<0>(kiln::max(in[0], 0, true)); },
        [](const std::vector<Ref>& r) {
          return ref_reduce(r[0], r[0].shape.empty() ? Shape{} : Shape{0}, true, ref_max);
        }),
    make("min_dim", "values_middle", {{{{3, 5, 4}}}, {{{2, 3, 0}}}},
         [](const std::vector<Tensor>& in) { return std::get<0>(kiln::min(in[0], -2)); },
         reduce_ref({-2}, false, ref_min), {kFloat32, kFloat64, kInt32}),
    // Integer-valued inputs tie often: the first extreme index must win.
    with_output(
        no_grad(make("max_dim", "indices",
                     {{{{6, 5}, Gen::Int}}, {{{256, 160}, Gen::Int}}, {{{40, 3, 7}, Gen::Int}}},
                     [](const std::vector<Tensor>& in) {
                       return std::get<1>(kiln::max(in[0], 1, true));
                     },
                     arg_ref({1}, true, true), {kFloat32, kFloat64, kInt64})),
        kInt64),
    with_output(no_grad(make("min_dim", "indices", {{{{6, 5}, Gen::Int}}, {{{160, 256}, Gen::Int}}},
                             [](const std::vector<Tensor>& in) {
                               return std::get<1>(kiln::min(in[0], 0));
                             },
                             arg_ref({0}, false, false), {kFloat32, kInt64})),
                kInt64),
    with_output(no_grad(make("max_dim", "argmax_flat",
                             {{{{6, 5}, Gen::Int}}, {{{}}}, {{{2, 3, 4}, Gen::Int}}},
                             [](const std::vector<Tensor>& in) { return in[0].argmax(); },
                             arg_ref({}, false, true), {kFloat32, kInt64})),
                kInt64),
    with_output(no_grad(make("max_dim", "argmax_dim", {{{{6, 5}, Gen::Int}}},
                             [](const std::vector<Tensor>& in) {
                               return kiln::argmax(in[0], -1, true);
                             },
                             arg_ref({-1}, true, true), {kFloat64})),
                kInt64),
    with_output(no_grad(make("min_dim", "argmin_flat", {{{{6, 5}, Gen::Int}}},
                             [](const std::vector<Tensor>& in) { return in[0].argmin(); },
                             arg_ref({}, false, false), {kFloat32, kInt64})),
                kInt64),
});

Register logical_cases({
    with_output(
        no_grad(make("all", "dims",
                     {{{{6, 2}, Gen::Bool}}, {{{0, 3}, Gen::Bool}}, {{{300, 2}, Gen::Bool}}},
                     [](const std::vector<Tensor>& in) { return in[0].all({1}); },
                     reduce_ref({1}, false,
                                [](const std::vector<double>& v) {
                                  bool r = true;
                                  for (double x : v) r = r && x != 0;
                                  return double(r);
                                }),
                     {kBool, kInt64, kFloat32})),
        kBool),
    with_output(no_grad(make("all", "everything",
                             {{{{2, 2}, Gen::Bool}}, {{{0, 3}}}, {{{}, Gen::Bool}}},
                             [](const std::vector<Tensor>& in) { return kiln::all(in[0]); },
                             reduce_ref({}, false,
                                        [](const std::vector<double>& v) {
                                          bool r = true;
                                          for (double x : v) r = r && x != 0;
                                          return double(r);
                                        }),
                             {kBool, kFloat64})),
                kBool),
    with_output(no_grad(make("any", "dims",
                             {{{{6, 2}, Gen::Bool}}, {{{0, 3}}}, {{{2, 300}, Gen::Bool}}},
                             [](const std::vector<Tensor>& in) { return in[0].any({0}, true); },
                             reduce_ref({0}, true,
                                        [](const std::vector<double>& v) {
                                          bool r = false;
                                          for (double x : v) r = r || x != 0;
                                          return double(r);
                                        }),
                             {kBool, kInt32, kFloat32})),
                kBool),
    with_output(no_grad(make("any", "everything", {{{{3, 2}, Gen::Bool}}, {{{0, 3}}}},
                             [](const std::vector<Tensor>& in) { return kiln::any(in[0]); },
                             reduce_ref({}, false,
                                        [](const std::vector<double>& v) {
                                          bool r = false;
                                          for (double x : v) r = r || x != 0;
                                          return double(r);
                                        }),
                             {kBool, kFloat64})),
                kBool),
});

RefFn var_ref(Shape dims, bool keepdim, double correction) {
  return reduce_ref(dims, keepdim,
                    [correction](const std::vector<double>& v) { return ref_var(v, correction); });
}

Register var_cases({
    make(
        "var", "inner", {{{{3, 4}}}, {{{64, 700}}}, {{{5, 1}}}},
        [](const std::vector<Tensor>& in) { return in[0].var({1}); }, var_ref({1}, false, 1)),
    make(
        "var", "all_population", {{{{3, 4}}}, {{{}}}, {{{0, 3}}}, {{{256, 160}}}},
        [](const std::vector<Tensor>& in) { return kiln::var(in[0], {}, 0); },
        var_ref({}, false, 0)),
    make(
        "var", "unbiased_0d_and_empty", {{{{}}}, {{{0, 3}}}},
        [](const std::vector<Tensor>& in) { return in[0].var(); }, var_ref({}, false, 1)),
    make(
        "var", "dims_keepdim_correction2", {{{{3, 4, 5}}}, {{{700, 64}}}},
        [](const std::vector<Tensor>& in) { return kiln::var(in[0], {0}, 2, true); },
        var_ref({0}, true, 2)),
    make(
        "var", "middle", {{{{3, 4, 5}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::var(in[0], {0, 2});
        },
        var_ref({0, 2}, false, 1)),
    make(
        "var", "std_composite", {{{{3, 4}}}, {{{2, 3, 5}}}},
        [](const std::vector<Tensor>& in) { return in[0].std({-1}, 1, true); },
        reduce_ref({-1}, true,
                   [](const std::vector<double>& v) { return std::sqrt(ref_var(v, 1)); })),
    make(
        "var", "var_mean_mean", {{{{3, 4}}}},
        [](const std::vector<Tensor>& in) { return std::get<1>(kiln::var_mean(in[0], {0})); },
        reduce_ref({0}, false,
                   [](const std::vector<double>& v) {
                     double s = 0;
                     for (double x : v) s += x;
                     return s / static_cast<double>(v.size());
                   })),
});

RefFn norm_ref(double p, Shape dims, bool keepdim) {
  return reduce_ref(dims, keepdim, [p](const std::vector<double>& v) { return ref_norm(v, p); });
}

Register norm_cases({
    make(
        "norm", "p2_all", {{{{3, 4}}}, {{{}}}, {{{0, 3}}}, {{{256, 160}}}},
        [](const std::vector<Tensor>& in) { return in[0].norm(); }, norm_ref(2, {}, false)),
    make(
        "norm", "p1_dim", {{{{3, 4}}}, {{{2, 3, 5}}}},
        [](const std::vector<Tensor>& in) { return kiln::norm(in[0], 1, {1}); },
        norm_ref(1, {1}, false)),
    make(
        "norm", "pinf_keepdim", {{{{3, 4}}}, {{{64, 700}}}},
        [](const std::vector<Tensor>& in) { return kiln::norm(in[0], kInf, {-1}, true); },
        norm_ref(kInf, {-1}, true)),
    make(
        "norm", "pneginf", {{{{3, 4}}}},
        [](const std::vector<Tensor>& in) { return kiln::norm(in[0], -kInf, {0}); },
        norm_ref(-kInf, {0}, false)),
    make(
        "norm", "p3_and_p0", {{{{3, 4}}}, {{{2, 3, 5}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::norm(in[0], 3, {0}) + kiln::norm(in[0], 0, {0});
        },
        [](const std::vector<Ref>& r) {
          return ref_map2(ref_reduce(r[0], {0}, false,
                                     [](const std::vector<double>& v) { return ref_norm(v, 3); }),
                          ref_reduce(r[0], {0}, false,
                                     [](const std::vector<double>& v) { return ref_norm(v, 0); }),
                          [](double a, double b) { return a + b; });
        }),
    make(
        "norm", "p_half", {{{{3, 4}, Gen::Positive}}},
        [](const std::vector<Tensor>& in) { return kiln::norm(in[0], 0.5, {1}); },
        norm_ref(0.5, {1}, false)),
    make(
        "norm", "fro", {{{{3, 4}}}, {{{2, 3, 5}}}},
        [](const std::vector<Tensor>& in) {
          return kiln::norm(in[0], "fro", {0, 1});
        },
        norm_ref(2, {0, 1}, false)),
});

// Composites built on sum/amax: mean and logsumexp.
Register composite_cases({
    make(
        "sum", "mean_composite", {{{{3, 4}}}, {{{}}}, {{{0, 3}}}, {{{2, 3, 5}}}},
        [](const std::vector<Tensor>& in) { return in[0].mean({0}); },
        [](const std::vector<Ref>& r) {
          return ref_reduce(r[0], r[0].shape.empty() ? Shape{} : Shape{0}, false,
                            [](const std::vector<double>& v) {
                              double s = 0;
                              for (double x : v) s += x;
                              return s / static_cast<double>(v.size());
                            });
        }),
    make(
        // A block of reduced dims between kept ones (a mean over a sequence's tokens), large
        // enough to be split across threads mid-block.
        "sum", "mean_middle_block", {{{{64, 28, 64, 3}}}, {{{2, 3, 4, 5}}}, {{{5, 1, 3, 7}}}},
        [](const std::vector<Tensor>& in) { return in[0].mean({1, 2}); },
        [](const std::vector<Ref>& r) {
          return ref_reduce(r[0], Shape{1, 2}, false, [](const std::vector<double>& v) {
            double s = 0;
            for (double x : v) s += x;
            return s / static_cast<double>(v.size());
          });
        }),
    make(
        "amax", "logsumexp_composite", {{{{3, 4}}}, {{{2, 3, 5}}}, {{{}}}, {{{64, 700}}}},
        [](const std::vector<Tensor>& in) { return in[0].logsumexp({-1}); },
        [](const std::vector<Ref>& r) {
          return ref_reduce(r[0], r[0].shape.empty() ? Shape{} : Shape{-1}, false, ref_logsumexp);
        }),
    make(
        "amax", "logsumexp_keepdim_empty", {{{{3, 4}}}, {{{0, 4}}}},
        [](const std::vector<Tensor>& in) { return kiln::logsumexp(in[0], {0}, true); },
        reduce_ref({0}, true, ref_logsumexp)),
});

// ---- behaviour the table cannot express ----

Tensor grad_of(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  Tensor leaf = x.detach().clone().requires_grad_(true);
  f(leaf).sum().backward();
  return leaf.grad();
}

TEST(Reductions, AmaxSplitsGradientBetweenTies) {
  Tensor g = grad_of(tensor({1.0, 3.0, 3.0, 2.0, 3.0}), [](const Tensor& x) { return x.amax(); });
  std::vector<double> want = {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3};
  std::vector<double> got = g.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(Reductions, MaxDimGradientGoesToTheFirstMaxOnly) {
  Tensor g = grad_of(tensor({1.0, 3.0, 3.0, 2.0}).reshape({2, 2}),
                     [](const Tensor& x) { return std::get<0>(kiln::max(x, 1)); });
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 1, 1, 0}));
  Tensor g0 =
      grad_of(Tensor::scalar(2.0), [](const Tensor& x) { return std::get<0>(kiln::min(x, 0)); });
  EXPECT_EQ(g0.item<double>(), 1.0);
}

TEST(Reductions, NanPropagatesAndWinsTheIndex) {
  Tensor x = tensor({1.0, NAN, 5.0, NAN}, kFloat64);
  EXPECT_TRUE(std::isnan(x.max().item<double>()));
  EXPECT_TRUE(std::isnan(x.amin().item<double>()));
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  EXPECT_EQ(x.argmin().item<int64_t>(), 1);
  Tensor big = kiln::full({1000}, 1.0, kFloat32);
  Tensor with_nan = kiln::cat({big, tensor({NAN}), big});
  EXPECT_TRUE(std::isnan(with_nan.amax().item<double>()));
  EXPECT_EQ(with_nan.argmax().item<int64_t>(), 1000);
  EXPECT_TRUE(std::isnan(kiln::norm(with_nan, kInf).item<double>()));
}

TEST(Reductions, ArgmaxKeepdimWithoutDimKeepsRank) {
  Tensor x = tensor({1.0, 9.0, 3.0, 4.0, 5.0, 6.0}).reshape({2, 3});
  Tensor i = x.argmax(std::nullopt, true);
  EXPECT_EQ(Shape(i.sizes()), (Shape{1, 1}));
  EXPECT_EQ(i.item<int64_t>(), 1);
  EXPECT_EQ(i.dtype(), kInt64);
}

TEST(Reductions, ProdGradientWithZeros) {
  // One zero: only the zero gets the product of the others. Two zeros: all zero.
  Tensor g = grad_of(tensor({2.0, 0.0, 3.0, 0.0, 0.0, 4.0}, kFloat64).reshape({2, 3}),
                     [](const Tensor& x) { return x.prod({1}); });
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 6, 0, 0, 0, 0}));
}

TEST(Reductions, NormOfZerosHasZeroGradient) {
  for (double p : {2.0, 1.0, 3.0, kInf}) {
    Tensor g =
        grad_of(kiln::zeros({3}, kFloat64), [p](const Tensor& x) { return kiln::norm(x, p); });
    for (double v : g.to_vector<double>()) EXPECT_EQ(v, 0.0) << "p=" << p;
  }
}

TEST(Reductions, LogsumexpDoesNotOverflow) {
  Tensor x = tensor({1000.0, 1000.0, -kInf}, kFloat32);
  EXPECT_NEAR(x.logsumexp({0}).item<double>(), 1000 + std::log(2.0), 1e-3);
  Tensor all_neg_inf = tensor({-kInf, -kInf}, kFloat32);
  EXPECT_EQ(all_neg_inf.logsumexp({0}).item<double>(), -kInf);
  Tensor ints = tensor({0, 0});
  EXPECT_EQ(ints.logsumexp({0}).dtype(), kFloat32);
  Tensor g =
      grad_of(tensor({1000.0, 1000.0}, kFloat64), [](const Tensor& x) { return x.logsumexp({0}); });
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0.5, 0.5}));
}

TEST(Reductions, VarIsStableForLargeOffsets) {
  // Naive E[x^2] - E[x]^2 in float32 loses every digit here; Welford in float64 does not.
  std::vector<float> v;
  for (int i = 0; i < 10000; ++i) v.push_back(1e4f + static_cast<float>(i % 2));
  Tensor x = Tensor::from_vector(v);
  EXPECT_NEAR(x.var({}, 0).item<double>(), 0.25, 1e-6);
}

TEST(Reductions, EmptyAndZeroDimResults) {
  Tensor e = kiln::zeros({0, 3});
  EXPECT_EQ(e.sum().item<double>(), 0);
  EXPECT_EQ(e.prod().item<double>(), 1);
  EXPECT_TRUE(e.all().item<bool>());
  EXPECT_FALSE(e.any().item<bool>());
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));
  EXPECT_EQ(e.norm().item<double>(), 0);
  // Reducing only non-empty dims of an empty tensor is fine for max-like reductions.
  EXPECT_EQ(Shape(e.amax({1}).sizes()), Shape{0});
  EXPECT_EQ(Shape(std::get<1>(kiln::max(e, 1)).sizes()), Shape{0});
  EXPECT_EQ(Shape(e.argmin(1, true).sizes()), (Shape{0, 1}));
  Tensor s = Tensor::scalar(3.0);
  EXPECT_EQ(s.argmax().item<int64_t>(), 0);
  EXPECT_EQ(std::get<1>(kiln::max(s, -1)).item<int64_t>(), 0);
  EXPECT_EQ(s.amax({0}).item<double>(), 3.0);
}

// The table's "{}" inputs come out 1-D, so 0-d inputs are checked here.
TEST(Reductions, ZeroDimInputsAndGradients) {
  auto scalar = [] { return Tensor::scalar(2.5, kFloat64); };
  EXPECT_EQ(Shape(scalar().prod().sizes()), Shape{});
  EXPECT_EQ(scalar().prod().item<double>(), 2.5);
  EXPECT_EQ(scalar().amin({}, true).item<double>(), 2.5);
  EXPECT_EQ(kiln::var(scalar(), {}, 0).item<double>(), 0.0);
  EXPECT_TRUE(std::isnan(scalar().var().item<double>()));  // N - 1 = 0
  EXPECT_EQ(kiln::norm(Tensor::scalar(-2.5, kFloat64)).item<double>(), 2.5);
  EXPECT_NEAR(scalar().logsumexp({}).item<double>(), 2.5, 1e-12);
  EXPECT_TRUE(Tensor::scalar(3, kInt64).all().item<bool>());
  auto [v, i] = kiln::max(scalar(), 0, true);
  EXPECT_EQ(Shape(v.sizes()), Shape{});
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(grad_of(scalar(), [](const Tensor& x) { return x.prod(); }).item<double>(), 1.0);
  EXPECT_EQ(grad_of(scalar(), [](const Tensor& x) { return x.amax(); }).item<double>(), 1.0);
  EXPECT_EQ(grad_of(scalar(), [](const Tensor& x) { return std::get<0>(kiln::max(x, -1)); })
                .item<double>(),
            1.0);
  EXPECT_EQ(grad_of(Tensor::scalar(-2.5, kFloat64), [](const Tensor& x) { return x.norm(); })
                .item<double>(),
            -1.0);
  EXPECT_NEAR(grad_of(scalar(), [](const Tensor& x) { return x.logsumexp({}); }).item<double>(),
              1.0, 1e-12);
  EXPECT_EQ(grad_of(scalar(), [](const Tensor& x) { return kiln::var(x, {}, 0); }).item<double>(),
            0.0);
}

TEST(Reductions, BroadcastInputsWithZeroStrides) {
  // expand() gives stride-0 dims: every kernel path must read them without a copy.
  Tensor row = kiln::tensor({1.0, 5.0, -2.0}, kFloat64);
  Tensor x = row.expand({4, 3});
  EXPECT_EQ(x.amax({0}).to_vector<double>(), (std::vector<double>{1, 5, -2}));
  EXPECT_EQ(x.amax({1}).to_vector<double>(), (std::vector<double>{5, 5, 5, 5}));
  EXPECT_EQ(std::get<1>(kiln::max(x, 1)).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(std::get<1>(kiln::min(x, 0)).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(x.var({0}).to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(x.prod({0}).to_vector<double>(), (std::vector<double>{1, 625, 16}));
}

TEST(Reductions, MaxDimOverLongRowsFindsFirstWinnerInEveryLane) {
  // Rows long enough for the lane-parallel scan, with the winner in various lanes/tail.
  for (int64_t n : {16, 17, 40, 1001}) {
    for (int64_t at : {int64_t(0), n / 3, n - 1}) {
      std::vector<double> v(static_cast<size_t>(n), 1.0);
      v[static_cast<size_t>(at)] = 7.0;
      v[static_cast<size_t>(n - 1)] = 7.0;  // a later tie must not win
      Tensor x = Tensor::from_vector(v);
      EXPECT_EQ(x.argmax().item<int64_t>(), at) << n << " " << at;
      EXPECT_EQ(std::get<1>(kiln::min(-x, 0)).item<int64_t>(), at) << n << " " << at;
      v[static_cast<size_t>(n / 2)] = NAN;
      EXPECT_EQ(Tensor::from_vector(v).argmax().item<int64_t>(), n / 2) << n;
    }
  }
}

// ---- errors: each names the op, what it expected, what it got, and a fix ----

TEST(ReductionErrors, MaxOfEmptyTensor) {
  Tensor e = kiln::zeros({0, 3});
  expect_error([&] { e.max(); }, {"[max]", "non-empty", "[0, 3]", "Fix:"});
  expect_error([&] { kiln::min(e); }, {"[min]", "non-empty"});
  expect_error([&] { e.argmax(); }, {"[argmax]", "non-empty", "Fix:"});
  expect_error([&] { e.amax({0}); }, {"[amax]", "dim 0", "size 0", "Fix:"});
  expect_error([&] { kiln::amin(e); }, {"[amin]", "size 0"});
  expect_error([&] { kiln::max(e, 0); }, {"[max]", "dim 0", "size 0"});
  expect_error([&] { e.argmin(0); }, {"[argmin]", "size 0"});
  expect_error([&] { kiln::norm(e, kInf); }, {"[norm]", "size 0", "finite p"});
}

TEST(ReductionErrors, BadDimsAndDtypes) {
  Tensor x = kiln::zeros({2, 3});
  expect_error([&] { x.amax({2}); }, {"[amax]", "dim 2", "out of range"});
  expect_error([&] { x.prod({1, -1}); }, {"[prod]", "appears twice"});
  expect_error([&] { kiln::max(x, 5); }, {"[max]", "dim 5"});
  expect_error([&] { tensor({1, 2}).var(); }, {"[var]", "int64", "Fix:"});
  expect_error([&] { tensor({1, 2}).norm(); }, {"[norm]", "int64", "Fix:"});
  expect_error([&] { kiln::norm(x, -1.0); }, {"[norm]", "p >= 0", "-1"});
  expect_error([&] { kiln::norm(x, "nuc"); }, {"[norm]", "\"nuc\"", "fro"});
  expect_error([&] { kiln::var(x, {}, NAN); }, {"[var]", "correction"});
}

// The ops' own checks (what a direct dispatch, e.g. from a trace, hits).
TEST(ReductionErrors, OpLevelChecks) {
  init();
  Tensor e = kiln::zeros({2, 0});
  ops::DimReduceAttrs a;
  a.dim = 1;
  expect_error([&] { dispatch(ops::max_dim, TensorSpan(&e, 1), a); },
               {"[max_dim]", "dim 1", "size 0"});
  ops::ReduceAttrs r;
  Tensor h = kiln::zeros({2}).to(kFloat16);
  expect_error([&] { dispatch(ops::sum, TensorSpan(&h, 1), r); },
               {"[sum]", "storage-only", "Fix:"});
}

}  // namespace
}  // namespace kiln::testing
