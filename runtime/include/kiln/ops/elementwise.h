// Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, logical
// ops, where and cast. All have LoweringClass::Elementwise.
#pragma once

#include <array>
#include <optional>

#include "kiln/op.h"

namespace kiln::ops {

// Unary, same dtype in and out (floating unless noted).
extern OpDef neg, abs, exp, log, log1p, sqrt, rsqrt, sin, cos, tanh, sigmoid, relu, silu, erf,
    square, reciprocal, sign, floor, ceil, round;

// erfinv(y): the x in [-inf, inf] with erf(x) = y, NaN outside [-1, 1]. Its scalar body and
// its CPU kernel take the same steps (scalar_bodies.cpp) with these constants.
extern OpDef erfinv;
namespace erfinv_steps {
// Giles's single-precision polynomials ("Approximating the erfinv function", 2011), highest
// power first, in w - 2.5 for the centre (w = -log(1 - y^2) < 5) and in sqrt(w) - 3 for the
// tails, fitted up to w = 16 (float32's largest y below 1).
inline constexpr std::array<double, 9> kCentre = {
    2.81022636e-08,  3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727,    1.50140941};
inline constexpr std::array<double, 9> kTail = {
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613,   0.00943887047,  1.00167406,    2.83297682};
// Float64 only: past the polynomials (w >= kAsymptoticFrom) the first guess is the
// asymptote of erfc; then kNewtonSteps Newton steps, on erf below kTailFrom and on
// log(erfc) (Laplace's continued fraction, kFractionTerms deep) from there.
inline constexpr double kAsymptoticFrom = 16;
inline constexpr double kTailFrom = 2;
inline constexpr int kFractionTerms = 48;
inline constexpr int kNewtonSteps = 3;
}  // namespace erfinv_steps

struct GeluAttrs : AttrsOf<GeluAttrs> {
  bool tanh_approximation = false;
  template <class V> void fields(V& v) { v("tanh", tanh_approximation); }
};
extern OpDef gelu;

struct LeakyReluAttrs : AttrsOf<LeakyReluAttrs> {
  double negative_slope = 0.01;
  template <class V> void fields(V& v) { v("negative_slope", negative_slope); }
};
extern OpDef leaky_relu;

struct EluAttrs : AttrsOf<EluAttrs> {
  double alpha = 1.0;
  template <class V> void fields(V& v) { v("alpha", alpha); }
};
extern OpDef elu;

struct ClampAttrs : AttrsOf<ClampAttrs> {
  std::optional<double> min, max;
  template <class V> void fields(V& v) { v("min", min), v("max", max); }
};
extern OpDef clamp;

struct PowScalarAttrs : AttrsOf<PowScalarAttrs> {
  double exponent = 1.0;
  template <class V> void fields(V& v) { v("exponent", exponent); }
};
extern OpDef pow_scalar;

struct CastAttrs : AttrsOf<CastAttrs> {
  DType dtype = DType::Float32;
  template <class V> void fields(V& v) { v("dtype", dtype); }
};
extern OpDef cast;

// Binary with broadcasting; inputs share a dtype (the frontend promotes first).
extern OpDef add, sub, mul, div, pow, maximum, minimum;
// atan2(a, b): the angle of the point (b, a) in [-pi, pi], floating.
extern OpDef atan2;
// Comparisons and logical ops produce bool.
extern OpDef eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_not;
// where(cond: bool, a, b): a and b share a dtype; all three broadcast.
extern OpDef where;

}  // namespace kiln::ops
