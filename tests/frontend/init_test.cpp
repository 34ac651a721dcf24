// kiln::nn::init: gains and fans, the statistics of every initializer over large tensors
// (bounds, mean, std against their formulas), orthogonality of orthogonal_, the truncated
// normal's moments and CDF, seeding, in-place use on parameters, and every error message.
#include "kiln/nn/init.h"

#include <gtest/gtest.h>

#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace I = kiln::nn::init;

struct Stats {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
};

Stats stats_of(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Stats s;
  for (double x : v) {
    s.mean += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size() - 1));
  return s;
}

TEST(NnInit, CalculateGain) {
  using N = I::Nonlinearity;
  for (N n : {N::Linear, N::Conv1d, N::Conv2d, N::Conv3d, N::ConvTranspose1d, N::ConvTranspose2d,
              N::ConvTranspose3d, N::Sigmoid})
    EXPECT_EQ(I::calculate_gain(n), 1.0);
  EXPECT_DOUBLE_EQ(I::calculate_gain(N::Tanh), 5.0 / 3);
  EXPECT_DOUBLE_EQ(I::calculate_gain(N::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(I::calculate_gain(N::LeakyReLU), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(I::calculate_gain(N::LeakyReLU, 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(I::calculate_gain(N::LeakyReLU, 0.0), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(I::calculate_gain(N::SELU), 0.75);
  expect_error([] { I::calculate_gain(N::LeakyReLU, INFINITY); }, {"finite negative slope"});
}

TEST(NnInit, FanInAndFanOut) {
  auto f = I::calculate_fan_in_and_fan_out(empty({3, 4}));
  EXPECT_EQ(f.fan_in, 4);
  EXPECT_EQ(f.fan_out, 3);
  f = I::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3}));  // conv [out, in, kh, kw]
  EXPECT_EQ(f.fan_in, 36);
  EXPECT_EQ(f.fan_out, 72);
  f = I::calculate_fan_in_and_fan_out(empty({5, 2, 7}));
  EXPECT_EQ(f.fan_in, 14);
  EXPECT_EQ(f.fan_out, 35);
  expect_error([] { I::calculate_fan_in_and_fan_out(empty({5})); },
               {"at least 2 dims", "float32[5]", "Fix:"});
  expect_error([] { I::xavier_uniform_(empty({5})); }, {"at least 2 dims"});
  expect_error([] { I::kaiming_normal_(empty({5})); }, {"at least 2 dims"});
}

TEST(NnInit, UniformAndNormalStatistics) {
  manual_seed(1);
  const int64_t n = 200000;
  Tensor t = empty({n}, kFloat64);
  Tensor r = I::uniform_(t, -1.5, 2.5);
  EXPECT_TRUE(r.is_same(t));
  Stats s = stats_of(t);
  EXPECT_GE(s.min, -1.5);
  EXPECT_LT(s.max, 2.5);
  EXPECT_LT(s.min, -1.49);
  EXPECT_GT(s.max, 2.49);
  EXPECT_NEAR(s.mean, 0.5, 0.01);
  EXPECT_NEAR(s.std, 4 / std::sqrt(12.0), 0.01);

  Tensor u = empty({n});  // float32
  I::normal_(u, 3.0, 0.5);
  s = stats_of(u);
  EXPECT_EQ(u.dtype(), kFloat32);
  EXPECT_NEAR(s.mean, 3.0, 0.005);
  EXPECT_NEAR(s.std, 0.5, 0.005);
  I::normal_(u, 1.0, 0.0);
  s = stats_of(u);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 1.0);
}

TEST(NnInit, ConstantZerosOnes) {
  Tensor t = empty({2, 3});
  EXPECT_TRUE(I::constant_(t, 0.25).is_same(t));
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 0.25));
  I::zeros_(t);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 0.0));
  I::ones_(t);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 1.0));
  Tensor i = zeros({3}, kInt64);  // fill works on integer tensors, as in PyTorch
  I::constant_(i, 7);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{7, 7, 7}));
}

TEST(NnInit, XavierStatistics) {
  manual_seed(2);
  Tensor w = empty({300, 500});
  I::xavier_uniform_(w, /*gain=*/2.0);
  double bound = 2.0 * std::sqrt(6.0 / 800);
  Stats s = stats_of(w);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_LT(s.min, -0.99 * bound);
  EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.01 * bound);
  EXPECT_NEAR(s.mean, 0, 0.01 * bound);

  Tensor c = empty({64, 32, 3, 3}, kFloat64);  // fan_in 288, fan_out 576
  I::xavier_normal_(c);
  s = stats_of(c);
  EXPECT_NEAR(s.std, std::sqrt(2.0 / (288 + 576)), 0.01 * std::sqrt(2.0 / 864));
  EXPECT_NEAR(s.mean, 0, 0.002);
}

TEST(NnInit, KaimingStatistics) {
  manual_seed(3);
  // nn.Linear's default: kaiming_uniform_(a = sqrt(5)) gives bound 1 / sqrt(fan_in).
  Tensor w = empty({400, 250});
  I::kaiming_uniform_(w, std::sqrt(5.0));
  Stats s = stats_of(w);
  double bound = 1 / std::sqrt(250.0);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_GT(s.max, 0.99 * bound);
  EXPECT_NEAR(s.std, bound / std::sqrt(3.0), 0.01 * bound);
  // fan_out with relu: std = sqrt(2 / fan_out).
  Tensor c = empty({32, 16, 5, 5}, kFloat64);  // fan_out 800
  I::kaiming_normal_(c, 0, I::FanMode::FanOut, I::Nonlinearity::ReLU);
  s = stats_of(c);
  EXPECT_NEAR(s.std, std::sqrt(2.0 / 800), 0.015 * std::sqrt(2.0 / 800));
  // Default (leaky_relu with a = 0, fan_in): bound sqrt(6 / fan_in).
  I::kaiming_uniform_(w);
  s = stats_of(w);
  EXPECT_LE(s.max, std::sqrt(6.0 / 250));
  EXPECT_GT(s.max, 0.99 * std::sqrt(6.0 / 250));
  I::kaiming_normal_(w, 0, I::FanMode::FanIn, I::Nonlinearity::Tanh);
  EXPECT_NEAR(stats_of(w).std, 5.0 / 3 / std::sqrt(250.0), 0.01 * 5.0 / 3 / std::sqrt(250.0));
  // A tensor without elements is left alone (no fan error, no draw).
  Tensor none = empty({0, 5});
  EXPECT_TRUE(I::kaiming_uniform_(none).is_same(none));
}

// Max |M M^T - gain^2 I| for the [rows, cols] view of w, with M oriented so rows <= cols.
double orthogonality_error(const Tensor& w, double gain) {
  int64_t rows = w.size(0), cols = w.numel() / rows;
  std::vector<double> v = w.to_vector<double>();
  bool wide = rows <= cols;
  int64_t k = wide ? rows : cols, len = wide ? cols : rows;
  auto el = [&](int64_t vec, int64_t i) { return wide ? v[vec * cols + i] : v[i * cols + vec]; };
  double err = 0;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < len; ++i) dot += el(a, i) * el(b, i);
      err = std::max(err, std::abs(dot - (a == b ? gain * gain : 0.0)));
    }
  return err;
}

TEST(NnInit, OrthogonalRowsOrColumns) {
  manual_seed(4);
  for (auto shape : {Shape{6, 6}, Shape{10, 4}, Shape{4, 10}, Shape{8, 3, 2, 2}, Shape{3, 2, 5}}) {
    Tensor w = empty(shape, kFloat64);
    I::orthogonal_(w, 1.0);
    EXPECT_LT(orthogonality_error(w, 1.0), 1e-12) << shape_str(shape);
    EXPECT_EQ(Shape(w.sizes()), shape);
  }
  Tensor f = empty({16, 32});
  I::orthogonal_(f, 2.0);
  EXPECT_LT(orthogonality_error(f, 2.0), 1e-5);
  // Q of the normal draw with R's diagonal made positive: for 1 x n it is the draw
  // normalized; for n x 1 likewise (QR of a vector is its direction, positive R).
  Generator g1(9), g2(9);
  Tensor row = empty({1, 5}, kFloat64);
  I::orthogonal_(row, 1.0, &g1);
  std::vector<double> draw = randn({1, 5}, kFloat64, &g2).to_vector<double>();
  double norm = 0;
  for (double x : draw) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<double> got = row.to_vector<double>();
  for (size_t i = 0; i < draw.size(); ++i) EXPECT_NEAR(got[i], draw[i] / norm, 1e-14);
  expect_error([] { I::orthogonal_(empty({4})); }, {"[nn::init::orthogonal_] expected a tensor "
                                                    "with at least 2 dims",
                                                    "float32[4]"});
}

double normal_pdf(double x) {
  return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi);
}
double normal_cdf(double x) {
  return (1 + std::erf(x / std::numbers::sqrt2)) / 2;
}

TEST(NnInit, TruncNormalMomentsAndCdf) {
  manual_seed(5);
  const double mean = 0.5, sd = 2.0, a = -1.0, b = 4.0;
  Tensor t = empty({200000}, kFloat64);
  I::trunc_normal_(t, mean, sd, a, b);
  Stats s = stats_of(t);
  EXPECT_GE(s.min, a);
  EXPECT_LE(s.max, b);
  // Moments of the truncated normal.
  double al = (a - mean) / sd, be = (b - mean) / sd, z = normal_cdf(be) - normal_cdf(al);
  double d = (normal_pdf(al) - normal_pdf(be)) / z;
  double want_mean = mean + sd * d;
  double want_std = sd * std::sqrt(1 + (al * normal_pdf(al) - be * normal_pdf(be)) / z - d * d);
  EXPECT_NEAR(s.mean, want_mean, 0.01);
  EXPECT_NEAR(s.std, want_std, 0.01);
  // The empirical CDF at a few points (this checks the inverse error function too).
  std::vector<double> v = t.to_vector<double>();
  for (double x : {-0.5, 0.5, 2.0, 3.5}) {
    double frac = 0;
    for (double e : v) frac += e <= x;
    frac /= static_cast<double>(v.size());
    EXPECT_NEAR(frac, (normal_cdf((x - mean) / sd) - normal_cdf(al)) / z, 0.004) << x;
  }
  // Far tails: a narrow window deep in the tail still lands inside it.
  Tensor tail = empty({1000});
  I::trunc_normal_(tail, 0, 1, 6.0, 6.5);
  s = stats_of(tail);
  EXPECT_GE(s.min, 6.0);
  EXPECT_LE(s.max, 6.5);
  EXPECT_LT(s.mean, 6.25);  // the density falls off inside the window
  // Defaults: std 1, [-2, 2].
  I::trunc_normal_(t);
  s = stats_of(t);
  EXPECT_GE(s.min, -2.0);
  EXPECT_LE(s.max, 2.0);
  EXPECT_LT(s.min, -1.99);
  expect_error([] { I::trunc_normal_(empty({3}), 0, 1, 2, 1); }, {"expected a < b", "Fix:"});
  expect_error([] { I::trunc_normal_(empty({3}), 0, 0); }, {"std > 0"});
}

// The inverse CDF sampler value by value, with erf inverted by bisection here.
TEST(NnInit, TruncNormalIsTheInverseCdfOfItsUniformDraws) {
  const double mean = 0.3, sd = 1.5, a = -1.0, b = 2.0;
  Generator g1(11), g2(11);
  Tensor t = I::trunc_normal_(empty({64}, kFloat64), mean, sd, a, b, &g1);
  std::vector<double> u = rand({64}, kFloat64, &g2).to_vector<double>();
  double lo = normal_cdf((a - mean) / sd), hi = normal_cdf((b - mean) / sd);
  std::vector<double> got = t.to_vector<double>();
  for (size_t i = 0; i < u.size(); ++i) {
    double p = lo + u[i] * (hi - lo), left = -40, right = 40;  // solve cdf(x) = p
    for (int it = 0; it < 200; ++it) {
      double mid = (left + right) / 2;
      (normal_cdf(mid) < p ? left : right) = mid;
    }
    double want = std::clamp(mean + sd * (left + right) / 2, a, b);
    EXPECT_NEAR(got[i], want, 1e-9) << i;
  }
}

TEST(NnInit, SeedingAndGenerators) {
  manual_seed(42);
  Tensor a = I::xavier_uniform_(empty({4, 5}));
  manual_seed(42);
  Tensor b = I::xavier_uniform_(empty({4, 5}));
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  Generator g1(7), g2(7);
  Tensor c = I::trunc_normal_(empty({10}), 0, 1, -2, 2, &g1);
  Tensor d = I::trunc_normal_(empty({10}), 0, 1, -2, 2, &g2);
  EXPECT_EQ(c.to_vector<float>(), d.to_vector<float>());
  Tensor e = I::orthogonal_(empty({4, 4}), 1, &g1);
  Tensor f = I::orthogonal_(empty({4, 4}), 1, &g2);
  EXPECT_EQ(e.to_vector<float>(), f.to_vector<float>());
  EXPECT_NE(c.to_vector<float>(), e.to_vector<float>());
}

TEST(NnInit, WorksInPlaceOnParametersAndViews) {
  // Parameters require grad; init runs under NoGradGuard and keeps them leaves.
  Tensor w = zeros({3, 4});
  w.set_requires_grad(true);
  Tensor same = I::kaiming_uniform_(w, std::sqrt(5.0));
  EXPECT_TRUE(same.is_same(w));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_NE(stats_of(w).max, 0.0);
  I::orthogonal_(w);
  EXPECT_LT(orthogonality_error(w, 1.0), 1e-5);
  I::trunc_normal_(w, 0, 0.02);
  EXPECT_LE(stats_of(w).max, 2.0);
  // A view writes through to its base.
  Tensor base = zeros({4, 6}, kFloat64);
  Tensor cols = base.slice(1, 0, 3);
  I::ones_(cols);
  I::uniform_(base.slice(1, 3, 6), 5, 6);
  std::vector<double> v = base.to_vector<double>();
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(v[r * 6 + c], 1.0);
    for (int64_t c = 3; c < 6; ++c) EXPECT_GE(v[r * 6 + c], 5.0);
  }
}

TEST(NnInit, Errors) {
  expect_error([] { I::uniform_(zeros({3}, kInt64)); },
               {"[nn::init::uniform_] expected a floating-point tensor, got int64[3]", "Fix:"});
  expect_error([] { I::normal_(zeros({3}, kInt64)); }, {"[nn::init::normal_]", "floating-point"});
  expect_error([] { I::uniform_(empty({3}), 1, 0); }, {"a <= b", "a=1, b=0"});
  expect_error([] { I::normal_(empty({3}), 0, -1); }, {"std >= 0", "std=-1"});
  expect_error([] { I::zeros_(Tensor()); }, {"[nn::init::constant_] got an undefined tensor"});
  expect_error([] { I::xavier_normal_(Tensor()); }, {"undefined tensor"});
}

}  // namespace
}  // namespace kiln
