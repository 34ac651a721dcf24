// Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, logical
// ops, where and cast. All have LoweringClass::Elementwise.
#pragma once

#include <optional>

#include "kiln/op.h"

namespace kiln::ops {

// Unary, same dtype in and out (floating unless noted).
extern OpDef neg, abs, exp, log, log1p, sqrt, rsqrt, sin, cos, tanh, sigmoid, relu, silu, erf,
    square, reciprocal, sign, floor, ceil, round;

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
// Comparisons and logical ops produce bool.
extern OpDef eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_not;
// where(cond: bool, a, b): a and b share a dtype; all three broadcast.
extern OpDef where;

}  // namespace kiln::ops
