// The scalar bodies of the elementwise ops: what each op computes for one element, written
// with the ScalarBuilder primitives to match the eager CPU kernels.
//
// Exact ops (arithmetic, comparisons, selects, rounding, casts) reproduce the eager kernels
// bit for bit, quirks included (each one is noted where it is matched). Transcendental ops
// use the primitive of the same name; the eager kernels use Eigen's vectorized versions on
// dense tensors, so those agree to a few ulps. Bodies never branch on values: the only
// choices are made from dtypes and attributes, while the body is built.
#include "scalar_bodies.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <optional>

#include "kiln/ops/elementwise.h"

namespace kiln::ops::scalar_bodies {

namespace {

using Operands = std::span<const ScalarValue>;

bool floating(ScalarBuilder& b, ScalarValue x) {
  return is_floating(b.dtype(x));
}
ScalarValue un(ScalarBuilder& b, ScalarOp op, ScalarValue x) {
  return b.unary(op, x);
}
ScalarValue bin(ScalarBuilder& b, ScalarOp op, ScalarValue x, ScalarValue y) {
  return b.binary(op, x, y);
}

// Nonzero (NaN included) is true, as the eager logical kernels test `x != 0`.
ScalarValue truth(ScalarBuilder& b, ScalarValue x) {
  return b.dtype(x) == DType::Bool ? x : b.cast(x, DType::Bool);
}

// The eager kernels negate as 0 - x (wrapping_neg in backends/cpu/kernels/wrapping.h, which
// runs floats through the same subtraction), so neg(+0.0) and neg(-0.0) are both +0.0 there;
// ScalarOp::Neg would give -0.0 for +0.0. On integers both wrap alike.
ScalarValue eager_negate(ScalarBuilder& b, ScalarValue x) {
  return b.sub(b.like(x, 0), x);
}

// 1 / (1 + exp(-x)), evaluated through exp(-|x|) so that it never overflows: the plain
// formula (and both eager forms) give 0 for float32 x < -88.7, where exp(x) is still
// representable, and silu built on it loses x * exp(x) there (-3.2e-37 at x = -88.5).
ScalarValue sigmoid_of(ScalarBuilder& b, ScalarValue x) {
  ScalarValue e = un(b, ScalarOp::Exp, un(b, ScalarOp::Neg, un(b, ScalarOp::Abs, x)));
  ScalarValue r = b.div(b.like(x, 1), b.add(b.like(x, 1), e));
  return b.select(bin(b, ScalarOp::Ge, x, b.like(x, 0)), r, b.mul(e, r));
}

// exp(x) - 1 without the cancellation of that formula near 0 (there is no Expm1
// primitive): tanh(x/2) = (e^x - 1) / (e^x + 1), so e^x - 1 = tanh(x/2) * (e^x + 1), each
// factor accurate to an ulp or two. Used for x <= 0, where e^x + 1 lies in [1, 2].
ScalarValue expm1_of(ScalarBuilder& b, ScalarValue x) {
  ScalarValue t = un(b, ScalarOp::Tanh, b.mul(x, b.like(x, 0.5)));
  return b.mul(t, b.add(un(b, ScalarOp::Exp, x), b.like(x, 1)));
}

// x where it is NaN or the comparison keeps it, else y: eager's NaN-propagating
// maximum/minimum, which also keeps x when x == y (so maximum(-0.0, +0.0) is -0.0, where
// ScalarOp::Max would give +0.0).
ScalarValue keep_first(ScalarBuilder& b, ScalarOp keep, ScalarValue x, ScalarValue y) {
  ScalarValue x_nan = bin(b, ScalarOp::Ne, x, x);
  return b.select(bin(b, ScalarOp::Or, bin(b, keep, x, y), x_nan), x, y);
}

// The ordering comparisons on bools, written with logic so that no backend has to decide
// whether true is 1 or -1 (a signed i1 compare would call true < false).
ScalarValue compare_bools(ScalarBuilder& b, ScalarOp op, ScalarValue x, ScalarValue y) {
  ScalarValue not_x = un(b, ScalarOp::Not, x), not_y = un(b, ScalarOp::Not, y);
  switch (op) {
    case ScalarOp::Lt:
      return bin(b, ScalarOp::And, not_x, y);
    case ScalarOp::Le:
      return bin(b, ScalarOp::Or, not_x, y);
    case ScalarOp::Gt:
      return bin(b, ScalarOp::And, x, not_y);
    case ScalarOp::Ge:
      return bin(b, ScalarOp::Or, x, not_y);
    default:
      return bin(b, op, x, y);  // Eq, Ne
  }
}

ScalarValue compare(ScalarBuilder& b, ScalarOp op, Operands x) {
  if (b.dtype(x[0]) == DType::Bool) return compare_bools(b, op, x[0], x[1]);
  return bin(b, op, x[0], x[1]);
}

// floor/ceil/round are the identity on integers, as in the eager kernels.
ScalarValue rounding(ScalarBuilder& b, ScalarOp op, ScalarValue x) {
  return floating(b, x) ? un(b, op, x) : x;
}

// The eager clamp kernel rounds integer bounds toward the inside of the range and then
// converts them to the dtype. A bound no value of the dtype can cross is dropped; one past
// the other end saturates (eager's conversion is undefined there).
struct IntBounds {
  double lowest, top;  // the dtype's minimum, and its largest value a double holds exactly
};
IntBounds int_bounds(DType t) {
  if (t == DType::Int32) return {-2147483648.0, 2147483647.0};
  return {-9223372036854775808.0, std::nextafter(9223372036854775808.0, 0.0)};
}

}  // namespace

// ---- unary ----

ScalarValue neg(ScalarBuilder& b, const Attrs&, Operands x) {
  return eager_negate(b, x[0]);
}
// x < 0 ? -x : x keeps -0.0 (and NaN's sign), as the eager kernel does; fabs would not.
ScalarValue abs(ScalarBuilder& b, const Attrs&, Operands x) {
  ScalarValue negative = bin(b, ScalarOp::Lt, x[0], b.like(x[0], 0));
  return b.select(negative, eager_negate(b, x[0]), x[0]);
}
ScalarValue exp(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Exp, x[0]);
}
ScalarValue log(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Log, x[0]);
}
ScalarValue log1p(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Log1p, x[0]);
}
ScalarValue sqrt(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Sqrt, x[0]);
}
ScalarValue rsqrt(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Rsqrt, x[0]);
}
ScalarValue sin(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Sin, x[0]);
}
ScalarValue cos(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Cos, x[0]);
}
ScalarValue tanh(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Tanh, x[0]);
}
ScalarValue sigmoid(ScalarBuilder& b, const Attrs&, Operands x) {
  return sigmoid_of(b, x[0]);
}
// x > 0 ? x : 0: NaN and -0.0 give +0.0.
ScalarValue relu(ScalarBuilder& b, const Attrs&, Operands x) {
  ScalarValue zero = b.like(x[0], 0);
  return b.select(bin(b, ScalarOp::Gt, x[0], zero), x[0], zero);
}
// x * sigmoid(x): silu(-inf) is NaN (-inf * 0), as in both eager forms.
ScalarValue silu(ScalarBuilder& b, const Attrs&, Operands x) {
  return b.mul(x[0], sigmoid_of(b, x[0]));
}
ScalarValue erf(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Erf, x[0]);
}
ScalarValue square(ScalarBuilder& b, const Attrs&, Operands x) {
  return b.mul(x[0], x[0]);
}
ScalarValue reciprocal(ScalarBuilder& b, const Attrs&, Operands x) {
  return b.div(b.like(x[0], 1), x[0]);
}
// (x > 0) - (x < 0): NaN and both zeros give +0.
ScalarValue sign(ScalarBuilder& b, const Attrs&, Operands x) {
  ScalarValue zero = b.like(x[0], 0);
  ScalarValue below = b.select(bin(b, ScalarOp::Lt, x[0], zero), b.like(x[0], -1), zero);
  return b.select(bin(b, ScalarOp::Gt, x[0], zero), b.like(x[0], 1), below);
}
ScalarValue floor(ScalarBuilder& b, const Attrs&, Operands x) {
  return rounding(b, ScalarOp::Floor, x[0]);
}
ScalarValue ceil(ScalarBuilder& b, const Attrs&, Operands x) {
  return rounding(b, ScalarOp::Ceil, x[0]);
}
ScalarValue round(ScalarBuilder& b, const Attrs&, Operands x) {
  return rounding(b, ScalarOp::RoundEven, x[0]);
}

// The eager formulas, in the eager evaluation order: 0.5 * x * (1 + erf(x * (1/sqrt 2))) and
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))).
ScalarValue gelu(ScalarBuilder& b, const Attrs& attrs, Operands x) {
  ScalarValue v = x[0];
  ScalarValue t;
  if (static_cast<const GeluAttrs&>(attrs).tanh_approximation) {
    ScalarValue cube = b.mul(b.mul(b.mul(b.like(v, 0.044715), v), v), v);
    t = un(b, ScalarOp::Tanh, b.mul(b.like(v, 0.7978845608028654), b.add(v, cube)));
  } else {
    t = un(b, ScalarOp::Erf, b.mul(v, b.like(v, 0.7071067811865476)));
  }
  return b.mul(b.mul(b.like(v, 0.5), v), b.add(b.like(v, 1), t));
}

ScalarValue leaky_relu(ScalarBuilder& b, const Attrs& attrs, Operands x) {
  ScalarValue slope = b.like(x[0], static_cast<const LeakyReluAttrs&>(attrs).negative_slope);
  ScalarValue positive = bin(b, ScalarOp::Gt, x[0], b.like(x[0], 0));
  return b.select(positive, x[0], b.mul(x[0], slope));
}

// x > 0 ? x : alpha * expm1(x). The eager kernel calls std::expm1; expm1_of agrees to a few
// ulps.
ScalarValue elu(ScalarBuilder& b, const Attrs& attrs, Operands x) {
  ScalarValue alpha = b.like(x[0], static_cast<const EluAttrs&>(attrs).alpha);
  ScalarValue positive = bin(b, ScalarOp::Gt, x[0], b.like(x[0], 0));
  return b.select(positive, x[0], b.mul(alpha, expm1_of(b, x[0])));
}

// Lower bound first, then upper (so min > max gives max); NaN stays NaN since comparisons
// with NaN are false.
ScalarValue clamp(ScalarBuilder& b, const Attrs& attrs, Operands x) {
  const auto& a = static_cast<const ClampAttrs&>(attrs);
  ScalarValue v = x[0];
  std::optional<double> lo = a.min, hi = a.max;
  if (!floating(b, v)) {
    IntBounds r = int_bounds(b.dtype(v));
    lo = lo && std::ceil(*lo) > r.lowest ? std::optional(std::min(std::ceil(*lo), r.top))
                                         : std::nullopt;
    hi = hi && std::floor(*hi) < -r.lowest ? std::optional(std::max(std::floor(*hi), r.lowest))
                                           : std::nullopt;
  }
  if (lo) {
    ScalarValue bound = b.like(v, *lo);
    v = b.select(bin(b, ScalarOp::Lt, v, bound), bound, v);
  }
  if (hi) {
    ScalarValue bound = b.like(v, *hi);
    v = b.select(bin(b, ScalarOp::Gt, v, bound), bound, v);
  }
  return v;
}

// The eager kernel special-cases 2 (x * x) and 0.5 (sqrt, which differs from pow at -0.0
// and -inf); every other exponent goes to pow.
ScalarValue pow_scalar(ScalarBuilder& b, const Attrs& attrs, Operands x) {
  double e = static_cast<const PowScalarAttrs&>(attrs).exponent;
  if (e == 2) return b.mul(x[0], x[0]);
  if (e == 0.5) return un(b, ScalarOp::Sqrt, x[0]);
  return bin(b, ScalarOp::Pow, x[0], b.like(x[0], e));
}

// Inverse of erf (see ops::erfinv_steps). Float32 keeps Giles's approximation (within a few
// ulp). Float64 refines it with Newton steps: on erf(x) = |y| in the centre, where erf keeps
// its digits; from x = kTailFrom on log(erfc(x)) = log(1 - |y|), since erf(x) - |y| near 1
// would carry erf's rounding over its tiny slope. erfc(x) = exp(-x^2) / sqrt(pi) * K(x), with
// K Laplace's continued fraction 1 / (x + (1/2) / (x + 1 / (x + (3/2) / ...))), so the step
// x += (log erfc(x) - log(1 - |y|)) * K / 2 needs no exp. Within 1e-15 relative everywhere
// (tests/frontend/special_functions_test.cpp).
ScalarValue erfinv(ScalarBuilder& b, const Attrs&, Operands x) {
  namespace steps = erfinv_steps;
  const ScalarValue y = x[0];
  auto c = [&](double v) { return b.like(y, v); };
  auto lt = [&](ScalarValue u, ScalarValue v) { return bin(b, ScalarOp::Lt, u, v); };
  auto log = [&](ScalarValue v) { return un(b, ScalarOp::Log, v); };
  auto sqrt = [&](ScalarValue v) { return un(b, ScalarOp::Sqrt, v); };
  auto horner = [&](ScalarValue w, std::span<const double> coefficients) {
    ScalarValue p = c(coefficients[0]);
    for (double k : coefficients.subspan(1)) p = b.add(c(k), b.mul(p, w));
    return p;
  };
  const ScalarValue a = un(b, ScalarOp::Abs, y), q = b.sub(c(1), a);
  const ScalarValue w = un(b, ScalarOp::Neg, log(b.mul(q, b.add(c(1), a))));
  ScalarValue r = b.mul(b.select(lt(w, c(5)), horner(b.sub(w, c(2.5)), steps::kCentre),
                                 horner(b.sub(sqrt(w), c(3)), steps::kTail)),
                        a);
  if (b.dtype(y) == DType::Float64) {
    const ScalarValue minus_log_q = un(b, ScalarOp::Neg, log(q));
    ScalarValue asymptote =
        sqrt(b.sub(minus_log_q, b.mul(c(0.5), log(b.mul(c(M_PI), minus_log_q)))));
    r = b.select(lt(w, c(steps::kAsymptoticFrom)), r, asymptote);
    for (int step = 0; step < steps::kNewtonSteps; ++step) {
      ScalarValue slope = b.mul(c(M_2_SQRTPI), un(b, ScalarOp::Exp, un(b, ScalarOp::Neg, b.mul(r, r))));
      ScalarValue centre = b.sub(r, b.div(b.sub(un(b, ScalarOp::Erf, r), a), slope));
      ScalarValue t = r;
      for (int k = steps::kFractionTerms; k >= 1; --k) t = b.add(r, b.div(c(k / 2.0), t));
      ScalarValue fraction = b.div(c(1), t);
      ScalarValue log_erfc = b.add(b.sub(un(b, ScalarOp::Neg, b.mul(r, r)), c(0.5 * std::log(M_PI))),
                                   log(fraction));
      ScalarValue tail = b.add(r, b.mul(b.add(log_erfc, minus_log_q), b.mul(fraction, c(0.5))));
      r = b.select(lt(r, c(steps::kTailFrom)), centre, tail);
    }
  }
  // The sign back (y itself for +-0, keeping -0), and +-inf at +-1.
  ScalarValue signed_r = b.select(lt(y, c(0)), un(b, ScalarOp::Neg, r), r);
  signed_r = b.select(bin(b, ScalarOp::Eq, y, c(0)), y, signed_r);
  ScalarValue edge = bin(b, ScalarOp::Eq, a, c(1));
  return b.select(edge, b.mul(y, c(std::numeric_limits<double>::infinity())), signed_r);
}

// The eager cast converts float16 and bfloat16 through float32, both ways (so float64 and
// integers reach float16 by two roundings), and tests a float64 for != 0 after rounding it
// to float32 (so 1e-50 casts to false). Both are matched here.
ScalarValue cast(ScalarBuilder& b, const Attrs& attrs, Operands x) {
  auto half = [](DType t) { return t == DType::Float16 || t == DType::BFloat16; };
  DType to = static_cast<const CastAttrs&>(attrs).dtype;
  ScalarValue v = x[0];
  DType from = b.dtype(v);
  if (from == to) return v;
  if (half(from) || (half(to) && from != DType::Float32) ||
      (to == DType::Bool && from == DType::Float64)) {
    v = b.cast(v, DType::Float32);
    if (to == DType::Float32) return v;
  }
  return b.cast(v, to);
}

// ---- binary ----

// On bools add is or and mul is and, as in the eager kernels.
ScalarValue add(ScalarBuilder& b, const Attrs&, Operands x) {
  if (b.dtype(x[0]) == DType::Bool) return bin(b, ScalarOp::Or, x[0], x[1]);
  return b.add(x[0], x[1]);
}
ScalarValue sub(ScalarBuilder& b, const Attrs&, Operands x) {
  return b.sub(x[0], x[1]);
}
ScalarValue mul(ScalarBuilder& b, const Attrs&, Operands x) {
  if (b.dtype(x[0]) == DType::Bool) return bin(b, ScalarOp::And, x[0], x[1]);
  return b.mul(x[0], x[1]);
}
ScalarValue div(ScalarBuilder& b, const Attrs&, Operands x) {
  return b.div(x[0], x[1]);
}
ScalarValue pow(ScalarBuilder& b, const Attrs&, Operands x) {
  return bin(b, ScalarOp::Pow, x[0], x[1]);
}
ScalarValue atan2(ScalarBuilder& b, const Attrs&, Operands x) {
  return bin(b, ScalarOp::Atan2, x[0], x[1]);
}
ScalarValue maximum(ScalarBuilder& b, const Attrs&, Operands x) {
  DType t = b.dtype(x[0]);
  if (t == DType::Bool) return bin(b, ScalarOp::Or, x[0], x[1]);
  if (!is_floating(t)) return bin(b, ScalarOp::Max, x[0], x[1]);
  return keep_first(b, ScalarOp::Ge, x[0], x[1]);
}
ScalarValue minimum(ScalarBuilder& b, const Attrs&, Operands x) {
  DType t = b.dtype(x[0]);
  if (t == DType::Bool) return bin(b, ScalarOp::And, x[0], x[1]);
  if (!is_floating(t)) return bin(b, ScalarOp::Min, x[0], x[1]);
  return keep_first(b, ScalarOp::Le, x[0], x[1]);
}

// ---- comparisons and logic ----

ScalarValue eq(ScalarBuilder& b, const Attrs&, Operands x) {
  return compare(b, ScalarOp::Eq, x);
}
ScalarValue ne(ScalarBuilder& b, const Attrs&, Operands x) {
  return compare(b, ScalarOp::Ne, x);
}
ScalarValue lt(ScalarBuilder& b, const Attrs&, Operands x) {
  return compare(b, ScalarOp::Lt, x);
}
ScalarValue le(ScalarBuilder& b, const Attrs&, Operands x) {
  return compare(b, ScalarOp::Le, x);
}
ScalarValue gt(ScalarBuilder& b, const Attrs&, Operands x) {
  return compare(b, ScalarOp::Gt, x);
}
ScalarValue ge(ScalarBuilder& b, const Attrs&, Operands x) {
  return compare(b, ScalarOp::Ge, x);
}
ScalarValue logical_and(ScalarBuilder& b, const Attrs&, Operands x) {
  return bin(b, ScalarOp::And, truth(b, x[0]), truth(b, x[1]));
}
ScalarValue logical_or(ScalarBuilder& b, const Attrs&, Operands x) {
  return bin(b, ScalarOp::Or, truth(b, x[0]), truth(b, x[1]));
}
ScalarValue logical_not(ScalarBuilder& b, const Attrs&, Operands x) {
  return un(b, ScalarOp::Not, truth(b, x[0]));
}
ScalarValue where(ScalarBuilder& b, const Attrs&, Operands x) {
  return b.select(x[0], x[1], x[2]);
}

// ---- losses ----

// (1 - t) * x + w * softplus(-x), w = 1 + (pos_weight - 1) * t (1 without pos_weight), with
// softplus(-x) = max(-x, 0) + log1p(exp(-|x|)), which never overflows.
ScalarValue binary_cross_entropy_with_logits(ScalarBuilder& b, const Attrs&, Operands x) {
  ScalarValue in = x[0], target = x[1], one = b.like(in, 1);
  ScalarValue neg_abs = un(b, ScalarOp::Neg, un(b, ScalarOp::Abs, in));
  ScalarValue softplus = b.add(bin(b, ScalarOp::Max, un(b, ScalarOp::Neg, in), b.like(in, 0)),
                               un(b, ScalarOp::Log1p, un(b, ScalarOp::Exp, neg_abs)));
  ScalarValue linear = b.mul(b.sub(one, target), in);
  if (x.size() < 3 || x[2].id < 0) return b.add(linear, softplus);
  ScalarValue weight = b.add(one, b.mul(b.sub(x[2], one), target));
  return b.add(linear, b.mul(weight, softplus));
}

}  // namespace kiln::ops::scalar_bodies
