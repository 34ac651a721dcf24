// erfinv and atan2 beyond the op table's random cases: their accuracy against a long double
// reference over the whole domain, their special values (+-1, NaN, signed zeros, infinities),
// and the compiled CPU kernels on the same values.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// erfinv(y) by bisection in long double, on erf near 0 and on erfc(x) = 1 - |y| near 1 (1 - |y|
// loses nothing there for a float or double y).
double erfinv_reference(double y) {
  if (std::isnan(y) || std::fabs(y) > 1) return kNaN;
  if (std::fabs(y) == 1) return std::copysign(kInf, y);
  if (y == 0) return y;
  const long double a = std::fabs(static_cast<long double>(y));
  long double lo = 0, hi = 30;
  for (int i = 0; i < 400; ++i) {
    long double mid = (lo + hi) / 2;
    // Near 0 erf keeps the digits, near 1 erfc does.
    bool below = a < 0.5L ? std::erf(mid) < a : std::erfc(mid) > 1.0L - a;
    (below ? lo : hi) = mid;
  }
  return std::copysign(static_cast<double>((lo + hi) / 2), y);
}

// Inputs spread over (-1, 1) with many close to +-1, where erfinv is hardest: uniform
// points, and 1 - 10^-k for k up to the dtype's precision.
std::vector<double> erfinv_sweep(DType dtype) {
  std::vector<double> v;
  for (int i = -2000; i <= 2000; ++i) v.push_back(i / 2000.5);
  const double smallest = dtype == kFloat64 ? 1e-16 : 6e-8;
  for (double e = 0.1; e >= smallest; e /= 1.7) {
    v.push_back(1 - e);
    v.push_back(e - 1);
  }
  v.push_back(std::nextafter(1.0, 0.0));  // the largest double below 1 (float32: rounds to 1)
  for (double e = 1e-30; e < 1e-3; e *= 13) v.push_back(e);
  return v;
}

struct Accuracy {
  double max_rel = 0, at = 0;
};

Accuracy relative_error(const std::vector<double>& x, const std::vector<double>& got,
                        double (*ref)(double)) {
  Accuracy a;
  for (size_t i = 0; i < x.size(); ++i) {
    double want = ref(x[i]);
    double rel = std::fabs(got[i] - want) / std::max(std::fabs(want), 1e-300);
    if (rel > a.max_rel) a = {rel, x[i]};
  }
  return a;
}

// The sweep's values as the dtype holds them (float32 rounds them).
Tensor as_tensor(const std::vector<double>& v, DType dtype) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(dtype);
}

struct ErfinvModule : nn::Module {
  Tensor forward(const Tensor& x) override { return erfinv(x); }
};
struct Atan2Module : nn::Module {
  Tensor forward(const Tensor& yx) override { return atan2(yx.select(0, 0), yx.select(0, 1)); }
};

TEST(SpecialFunctions, ErfinvAccuracyEagerAndCompiled) {
  auto model = std::make_shared<ErfinvModule>();
  auto compiled = compile(model, {.backend = "cpu"});
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = as_tensor(erfinv_sweep(dtype), dtype);
    std::vector<double> xs = x.to_vector<double>();
    Accuracy eager = relative_error(xs, erfinv(x).to_vector<double>(), erfinv_reference);
    Accuracy fused = relative_error(xs, compiled(x).to_vector<double>(), erfinv_reference);
    std::printf("[erfinv] %s: eager max rel %.2e at %.17g, compiled max rel %.2e at %.17g\n",
                std::string(dtype_name(dtype)).c_str(), eager.max_rel, eager.at, fused.max_rel, fused.at);
    // Float32 is within a few ulp (2^-23 = 1.2e-7) everywhere, float64 within a few ulp of
    // the exact result up to the last double below 1.
    const double bound = dtype == kFloat32 ? 6e-7 : 2e-15;
    EXPECT_LT(eager.max_rel, bound) << dtype_name(dtype);
    EXPECT_LT(fused.max_rel, bound) << dtype_name(dtype);
  }
}

TEST(SpecialFunctions, ErfinvSpecialValues) {
  auto model = std::make_shared<ErfinvModule>();
  auto compiled = compile(model, {.backend = "cpu"});
  const std::vector<double> x = {1, -1, 1.5, -2, kNaN, 0, -0.0, kInf};
  const std::vector<double> want = {kInf, -kInf, kNaN, kNaN, kNaN, 0, -0.0, kNaN};
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor t = as_tensor(x, dtype);
    for (const auto& [label, got] : {std::pair{"eager", erfinv(t).to_vector<double>()},
                                     std::pair{"compiled", compiled(t).to_vector<double>()}}) {
      for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << label << " " << dtype_name(dtype) << " x=" << x[i];
        } else {
          EXPECT_EQ(got[i], want[i]) << label << " " << dtype_name(dtype) << " x=" << x[i];
          EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << label << " x=" << x[i];
        }
      }
    }
  }
  // Integers become float32, as in PyTorch.
  Tensor ints = Tensor::from_vector(std::vector<int64_t>{0, 1, -1});
  Tensor r = erfinv(ints);
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_EQ(r.to_vector<float>()[1], std::numeric_limits<float>::infinity());
}

// erfinv(erf(x)) returns x, and the gradient is sqrt(pi)/2 exp(erfinv(y)^2).
TEST(SpecialFunctions, ErfinvInvertsErfAndItsGradient) {
  Tensor x = Tensor::from_vector(std::vector<double>{-3, -1.2, -0.1, 0.3, 2.5});
  std::vector<double> back = erfinv(erf(x)).to_vector<double>(), xs = x.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(back[i], xs[i], 1e-12 * std::fabs(xs[i])) << xs[i];
  Tensor y = erf(x).detach().requires_grad_();
  erfinv(y).sum().backward();
  std::vector<double> g = y.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(g[i], std::sqrt(M_PI) / 2 * std::exp(xs[i] * xs[i]), 1e-9 * g[i]) << xs[i];
}

double atan2_reference(double y, double x) { return static_cast<double>(std::atan2(static_cast<long double>(y), static_cast<long double>(x))); }

TEST(SpecialFunctions, Atan2AccuracyAndSpecialValues) {
  auto model = std::make_shared<Atan2Module>();
  auto compiled = compile(model, {.backend = "cpu"});
  // Points on circles of many radii, every angle, and the special values C's atan2 defines.
  std::vector<double> ys, xs;
  for (double radius : {1e-30, 1e-3, 1.0, 7.5, 1e20})
    for (int k = 0; k < 720; ++k) {
      ys.push_back(radius * std::sin(k * M_PI / 360 + 0.001));
      xs.push_back(radius * std::cos(k * M_PI / 360 + 0.001));
    }
  const std::vector<std::pair<double, double>> special = {
      {0.0, 0.0},   {-0.0, 0.0},  {0.0, -0.0},   {-0.0, -0.0}, {1, 0},      {-1, 0},
      {0.0, -1},    {-0.0, -1},   {0.0, 1},      {kInf, kInf}, {kInf, -kInf}, {-kInf, kInf},
      {-kInf, -kInf}, {kInf, 1},  {1, kInf},     {1, -kInf},   {-1, -kInf}, {kNaN, 1},
      {1, kNaN}};
  for (const auto& [y, x] : special) ys.push_back(y), xs.push_back(x);
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor yx = stack({as_tensor(ys, dtype), as_tensor(xs, dtype)});
    std::vector<double> y = yx.select(0, 0).to_vector<double>(), x = yx.select(0, 1).to_vector<double>();
    for (const auto& [label, got] : {std::pair{"eager", atan2(yx.select(0, 0), yx.select(0, 1)).to_vector<double>()},
                                     std::pair{"compiled", compiled(yx).to_vector<double>()}}) {
      double max_rel = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        double want = atan2_reference(y[i], x[i]);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i])) << label << " atan2(" << y[i] << ", " << x[i] << ")";
          continue;
        }
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << label << " atan2(" << y[i] << ", " << x[i] << ")";
        double rel = want == 0 ? std::fabs(got[i]) : std::fabs(got[i] - want) / std::fabs(want);
        max_rel = std::max(max_rel, rel);
      }
      std::printf("[atan2] %s %s: max rel %.2e\n", std::string(dtype_name(dtype)).c_str(), label, max_rel);
      EXPECT_LT(max_rel, dtype == kFloat32 ? 5e-7 : 1e-15) << label << " " << dtype_name(dtype);
    }
  }
}

TEST(SpecialFunctions, Atan2PromotesBroadcastsAndDifferentiates) {
  Tensor a = Tensor::from_vector(std::vector<int64_t>{1, -1});
  Tensor r = atan2(a, Tensor::from_vector(std::vector<int64_t>{0}));
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{std::atan2(1.0f, 0.0f), std::atan2(-1.0f, 0.0f)}));
  Tensor y = Tensor::from_vector(std::vector<double>{0.5, -2}).requires_grad_();
  Tensor x = Tensor::scalar(1.5, kFloat64).requires_grad_();
  atan2(y, x).sum().backward();
  // d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2), x's summed over the broadcast.
  std::vector<double> gy = y.grad().to_vector<double>();
  EXPECT_NEAR(gy[0], 1.5 / (2.25 + 0.25), 1e-15);
  EXPECT_NEAR(gy[1], 1.5 / (2.25 + 4), 1e-15);
  EXPECT_NEAR(x.grad().item<double>(), -0.5 / 2.5 + 2 / 6.25, 1e-15);
  expect_error([] { (void)atan2(Tensor(), Tensor::scalar(1.0)); }, {"[atan2]", "undefined"});
}

}  // namespace
}  // namespace kiln
