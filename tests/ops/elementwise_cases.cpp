// OpCases for the elementwise ops.
#include <cmath>

#include "harness.h"

namespace kiln::testing {
namespace {

using Fn1 = Tensor (*)(const Tensor&);

OpCase unary(std::string op, std::function<Tensor(const Tensor&)> fn, std::function<double(double)> ref,
             Gen gen = Gen::Uniform, bool grad = true) {
  OpCase c;
  c.op = op;
  c.label = "unary";
  c.runs = unary_runs(gen);
  c.fn = [fn](const std::vector<Tensor>& in) { return fn(in[0]); };
  c.ref = [ref](const std::vector<Ref>& r) { return ref_map(r[0], ref); };
  c.gradcheck = grad;
  return c;
}

OpCase binary(std::string op, std::function<Tensor(const Tensor&, const Tensor&)> fn,
              std::function<double(double, double)> ref, Gen a = Gen::Uniform, Gen b = Gen::Uniform,
              bool grad = true) {
  OpCase c;
  c.op = op;
  c.label = "binary";
  c.runs = binary_runs(a, b);
  c.fn = [fn](const std::vector<Tensor>& in) { return fn(in[0], in[1]); };
  c.ref = [ref](const std::vector<Ref>& r) { return ref_map2(r[0], r[1], ref); };
  c.gradcheck = grad;
  return c;
}

OpCase with_dtypes(OpCase c, std::vector<DType> dtypes, std::string label) {
  c.dtypes = std::move(dtypes);
  c.label = std::move(label);
  c.gradcheck = false;
  return c;
}

const std::vector<DType> kInts = {kInt32, kInt64};
const std::vector<DType> kAll = {kInt32, kInt64, kFloat32, kFloat64};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double sign_ref(double x) { return (x > 0) - (x < 0); }
// erf inverted by bisection (the test inputs stay inside (-0.9, 0.9)).
double erfinv_ref(double y) {
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; ++i) (std::erf((lo + hi) / 2) < y ? lo : hi) = (lo + hi) / 2;
  return (lo + hi) / 2;
}

Register elementwise({
    unary("neg", [](const Tensor& x) { return -x; }, [](double x) { return -x; }),
    with_dtypes(unary("neg", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, Gen::Int), kInts, "ints"),
    unary("abs", kiln::abs, [](double x) { return std::fabs(x); }, Gen::NonZero),
    with_dtypes(unary("abs", kiln::abs, [](double x) { return std::fabs(x); }, Gen::Int), kInts, "ints"),
    unary("exp", kiln::exp, [](double x) { return std::exp(x); }),
    unary("log", kiln::log, [](double x) { return std::log(x); }, Gen::Positive),
    unary("log1p", kiln::log1p, [](double x) { return std::log1p(x); }, Gen::Positive),
    unary("sqrt", kiln::sqrt, [](double x) { return std::sqrt(x); }, Gen::Positive),
    unary("rsqrt", kiln::rsqrt, [](double x) { return 1 / std::sqrt(x); }, Gen::Positive),
    unary("sin", kiln::sin, [](double x) { return std::sin(x); }),
    unary("cos", kiln::cos, [](double x) { return std::cos(x); }),
    unary("tanh", kiln::tanh, [](double x) { return std::tanh(x); }),
    unary("sigmoid", kiln::sigmoid, sigmoid_ref),
    unary("relu", kiln::relu, [](double x) { return x > 0 ? x : 0; }, Gen::NonZero),
    with_dtypes(unary("relu", kiln::relu, [](double x) { return x > 0 ? x : 0; }, Gen::Int), kInts, "ints"),
    unary("gelu", [](const Tensor& x) { return kiln::gelu(x); }, gelu_ref),
    [] {
      OpCase c = unary(
          "gelu", [](const Tensor& x) { return kiln::gelu(x, GeluApproximation::Tanh); },
          gelu_tanh_ref);
      c.label = "tanh";
      return c;
    }(),
    unary("silu", kiln::silu, [](double x) { return x * sigmoid_ref(x); }),
    unary("leaky_relu", [](const Tensor& x) { return kiln::leaky_relu(x, 0.2); },
          [](double x) { return x > 0 ? x : 0.2 * x; }, Gen::NonZero),
    unary("elu", [](const Tensor& x) { return kiln::elu(x, 1.5); },
          [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, Gen::NonZero),
    unary("erf", kiln::erf, [](double x) { return std::erf(x); }),
    unary("erfinv", kiln::erfinv, erfinv_ref, Gen::Unit),
    unary("square", kiln::square, [](double x) { return x * x; }),
    with_dtypes(unary("square", kiln::square, [](double x) { return x * x; }, Gen::Int), kInts, "ints"),
    unary("reciprocal", kiln::reciprocal, [](double x) { return 1 / x; }, Gen::NonZero),
    unary("sign", kiln::sign, sign_ref),
    with_dtypes(unary("sign", kiln::sign, sign_ref, Gen::Int), kInts, "ints"),
    unary("floor", kiln::floor, [](double x) { return std::floor(x); }),
    unary("ceil", kiln::ceil, [](double x) { return std::ceil(x); }),
    unary("round", kiln::round, [](double x) { return std::nearbyint(x); }),
    with_dtypes(unary("round", kiln::round, [](double x) { return x; }, Gen::Int), kInts, "ints"),
    unary("clamp", [](const Tensor& x) { return kiln::clamp(x, -0.5, 1.0); },
          [](double x) { return std::min(std::max(x, -0.5), 1.0); }),
    [] {
      OpCase c = unary("clamp", [](const Tensor& x) { return kiln::clamp(x, std::nullopt, 0.25); },
                       [](double x) { return std::min(x, 0.25); });
      c.label = "max_only";
      return c;
    }(),
    with_dtypes(unary("clamp", [](const Tensor& x) { return kiln::clamp(x, -2, 3); },
                      [](double x) { return std::min(std::max(x, -2.0), 3.0); }, Gen::Int),
                kInts, "ints"),
    unary("pow_scalar", [](const Tensor& x) { return kiln::pow(x, 2.5); },
          [](double x) { return std::pow(x, 2.5); }, Gen::Positive),
    [] {
      OpCase c = unary("pow_scalar", [](const Tensor& x) { return kiln::pow(x, 2); },
                       [](double x) { return x * x; });
      c.label = "square";
      return c;
    }(),
    [] {
      // Two casts through float64 are exact, so finite differences stay precise.
      OpCase c = unary("cast", [](const Tensor& x) { return kiln::cast(kiln::cast(x, kFloat64), x.dtype()); },
                       [](double x) { return x; });
      return c;
    }(),
    [] {
      OpCase c = unary("cast", [](const Tensor& x) { return x.to(kInt32); },
                       [](double x) { return std::trunc(x); });
      c.label = "to_int";
      c.gradcheck = false;
      return c;
    }(),
    [] {
      OpCase c = unary("cast", [](const Tensor& x) { return x.to(kFloat16).to(kFloat32); },
                       [](double x) { return static_cast<double>(static_cast<float>(Half(static_cast<float>(x)))); });
      c.label = "float16_round_trip";
      c.gradcheck = false;
      return c;
    }(),
    [] {
      OpCase c = unary("cast", [](const Tensor& x) { return x.to(kBFloat16).to(kFloat32); },
                       [](double x) { return static_cast<double>(static_cast<float>(BFloat16(static_cast<float>(x)))); });
      c.label = "bfloat16_round_trip";
      c.gradcheck = false;
      return c;
    }(),
    binary("add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }),
    with_dtypes(binary("add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }, Gen::Int, Gen::Int), kInts, "ints"),
    binary("sub", kiln::sub, [](double a, double b) { return a - b; }),
    binary("mul", kiln::mul, [](double a, double b) { return a * b; }),
    with_dtypes(binary("mul", kiln::mul, [](double a, double b) { return a * b; }, Gen::Int, Gen::Int), kInts, "ints"),
    binary("div", kiln::div, [](double a, double b) { return a / b; }, Gen::Uniform, Gen::NonZero),
    binary("pow", [](const Tensor& a, const Tensor& b) { return kiln::pow(a, b); },
           [](double a, double b) { return std::pow(a, b); }, Gen::Positive, Gen::Uniform),
    binary("atan2", kiln::atan2, [](double a, double b) { return std::atan2(a, b); }, Gen::Uniform,
           Gen::NonZero),
    [] {  // every quadrant, the axes and the origin's neighbourhood (gradients stay finite)
      OpCase c = binary("atan2", kiln::atan2, [](double a, double b) { return std::atan2(a, b); },
                        Gen::NonZero, Gen::Uniform);
      c.label = "quadrants";
      return c;
    }(),
    binary("maximum", kiln::maximum, [](double a, double b) { return std::max(a, b); }),
    binary("minimum", kiln::minimum, [](double a, double b) { return std::min(a, b); }),
    with_dtypes(binary("maximum", kiln::maximum, [](double a, double b) { return std::max(a, b); }, Gen::Int, Gen::Int),
                kInts, "ints"),
    with_dtypes(binary("eq", kiln::eq, [](double a, double b) { return double(a == b); }, Gen::Int, Gen::Int), kAll, "all"),
    with_dtypes(binary("ne", kiln::ne, [](double a, double b) { return double(a != b); }, Gen::Int, Gen::Int), kAll, "all"),
    with_dtypes(binary("lt", kiln::lt, [](double a, double b) { return double(a < b); }, Gen::Int, Gen::Int), kAll, "all"),
    with_dtypes(binary("le", kiln::le, [](double a, double b) { return double(a <= b); }, Gen::Int, Gen::Int), kAll, "all"),
    with_dtypes(binary("gt", kiln::gt, [](double a, double b) { return double(a > b); }, Gen::Int, Gen::Int), kAll, "all"),
    with_dtypes(binary("ge", kiln::ge, [](double a, double b) { return double(a >= b); }, Gen::Int, Gen::Int), kAll, "all"),
    with_dtypes(binary("logical_and", kiln::logical_and, [](double a, double b) { return double(a != 0 && b != 0); },
                       Gen::Bool, Gen::Bool), {kBool, kFloat32}, "all"),
    with_dtypes(binary("logical_or", kiln::logical_or, [](double a, double b) { return double(a != 0 || b != 0); },
                       Gen::Bool, Gen::Bool), {kBool, kInt64}, "all"),
    with_dtypes(unary("logical_not", kiln::logical_not, [](double a) { return double(a == 0); }, Gen::Bool),
                {kBool, kFloat32}, "all"),
    [] {
      OpCase c;
      c.op = "where";
      c.label = "broadcast";
      c.runs = {
          {{{3, 4}, Gen::Bool, kBool}, {{3, 4}}, {{3, 4}}},
          {{{3, 1}, Gen::Bool, kBool}, {{4}}, {{}}},
          {{{256, 160}, Gen::Bool, kBool}, {{256, 160}}, {{160}}},
      };
      c.fn = [](const std::vector<Tensor>& in) { return kiln::where(in[0], in[1], in[2]); };
      c.ref = [](const std::vector<Ref>& r) {
        return ref_map3(r[0], r[1], r[2], [](double c, double a, double b) { return c != 0 ? a : b; });
      };
      return c;
    }(),
});

}  // namespace
}  // namespace kiln::testing
