// Every elementwise op's scalar body (kiln/scalar_body.h) against its eager CPU kernel. An
// evaluator implements ScalarBuilder with plain C++ arithmetic in each value's dtype; the
// table runs every op, on every dtype its infer accepts and every attribute variant below,
// over a grid of awkward values, on dense inputs (where eager uses Eigen's vectorized
// functions) and on strided ones (where eager calls std:: functions, as the evaluator does).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/dispatch.h"
#include "kiln/init.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/loss.h"
#include "test_util.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- the evaluator ----

// One value: floating ones in f (a float32 one exactly), integers and bools in i.
struct EvalValue {
  DType dtype = DType::Float32;
  double f = 0;
  int64_t i = 0;
  // Undefined in C++ and in LLVM (a float outside an integer's range converted to it): eager
  // gives whatever the hardware does, so such elements are not compared.
  bool poison = false;
};

bool is_half(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

double round_to(double v, DType t) {
  switch (t) {
    case DType::Float32:
      return static_cast<float>(v);
    case DType::Float16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    default:
      return v;
  }
}

int64_t int_min(DType t) {
  return t == DType::Int32 ? std::numeric_limits<int32_t>::min()
                           : std::numeric_limits<int64_t>::min();
}
// Two's complement wrap-around to t's width.
int64_t wrap(uint64_t v, DType t) {
  return t == DType::Int32 ? static_cast<int32_t>(v) : static_cast<int64_t>(v);
}

bool is_comparison(ScalarOp op) {
  return op >= ScalarOp::Eq && op <= ScalarOp::Ge;
}

[[noreturn]] void unsupported(ScalarOp op, DType t) {
  KILN_FAIL("[EvalBuilder] expected ", scalar_op_name(op), " on a dtype it supports, found ", t,
            ". Fix: the scalar body must convert first (see kiln/scalar_body.h).");
}

template <class T>
T float_unary(ScalarOp op, T x) {
  switch (op) {
    case ScalarOp::Neg:
      return -x;
    case ScalarOp::Abs:
      return std::fabs(x);
    case ScalarOp::Exp:
      return std::exp(x);
    case ScalarOp::Log:
      return std::log(x);
    case ScalarOp::Log1p:
      return std::log1p(x);
    case ScalarOp::Sqrt:
      return std::sqrt(x);
    case ScalarOp::Rsqrt:
      return T(1) / std::sqrt(x);
    case ScalarOp::Sin:
      return std::sin(x);
    case ScalarOp::Cos:
      return std::cos(x);
    case ScalarOp::Tanh:
      return std::tanh(x);
    case ScalarOp::Erf:
      return std::erf(x);
    case ScalarOp::Floor:
      return std::floor(x);
    case ScalarOp::Ceil:
      return std::ceil(x);
    case ScalarOp::RoundEven:
      return std::nearbyint(x);
    default:
      unsupported(op, dtype_of<T>());
  }
}

// The comparisons, for operands of any type: whether `op` is one (its result in r.i).
template <class T>
bool compare(ScalarOp op, T x, T y, EvalValue& r) {
  switch (op) {
    case ScalarOp::Eq:
      r.i = x == y;
      return true;
    case ScalarOp::Ne:
      r.i = x != y;
      return true;
    case ScalarOp::Lt:
      r.i = x < y;
      return true;
    case ScalarOp::Le:
      r.i = x <= y;
      return true;
    case ScalarOp::Gt:
      r.i = x > y;
      return true;
    case ScalarOp::Ge:
      r.i = x >= y;
      return true;
    default:
      return false;
  }
}

template <class T>
void float_binary(ScalarOp op, T x, T y, EvalValue& r) {
  bool nan = std::isnan(x) || std::isnan(y);
  switch (op) {
    case ScalarOp::Add:
      r.f = x + y;
      return;
    case ScalarOp::Sub:
      r.f = x - y;
      return;
    case ScalarOp::Mul:
      r.f = x * y;
      return;
    case ScalarOp::Div:
      r.f = x / y;
      return;
    case ScalarOp::Pow:
      r.f = std::pow(x, y);
      return;
    case ScalarOp::Atan2:
      r.f = std::atan2(x, y);
      return;
    // IEEE maximum/minimum: NaN wins, and -0 < +0.
    case ScalarOp::Max:
      r.f = nan ? kNaN : x == y ? (std::signbit(x) ? y : x) : std::max(x, y);
      return;
    case ScalarOp::Min:
      r.f = nan ? kNaN : x == y ? (std::signbit(x) ? x : y) : std::min(x, y);
      return;
    default:
      if (!compare(op, x, y, r)) unsupported(op, dtype_of<T>());
  }
}

void int_binary(ScalarOp op, int64_t x, int64_t y, DType t, EvalValue& r) {
  uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (op) {
    case ScalarOp::Add:
      r.i = wrap(ux + uy, t);
      return;
    case ScalarOp::Sub:
      r.i = wrap(ux - uy, t);
      return;
    case ScalarOp::Mul:
      r.i = wrap(ux * uy, t);
      return;
    case ScalarOp::Div:
      if (y == 0 || (x == int_min(t) && y == -1))
        r.poison = true;
      else
        r.i = x / y;
      return;
    case ScalarOp::Max:
      r.i = std::max(x, y);
      return;
    case ScalarOp::Min:
      r.i = std::min(x, y);
      return;
    default:
      if (!compare(op, x, y, r)) unsupported(op, t);
  }
}

// Bools support only logic and equality here: a body that adds or orders bools leaves the
// meaning of true (1 or -1?) to each backend.
void bool_binary(ScalarOp op, bool x, bool y, EvalValue& r) {
  switch (op) {
    case ScalarOp::And:
      r.i = x && y;
      return;
    case ScalarOp::Or:
      r.i = x || y;
      return;
    case ScalarOp::Eq:
      r.i = x == y;
      return;
    case ScalarOp::Ne:
      r.i = x != y;
      return;
    default:
      unsupported(op, DType::Bool);
  }
}

// Evaluates a scalar body in each value's own dtype: float32 in float with the float
// overloads of <cmath>, float64 in double, integers wrapping around. It refuses what
// kiln/scalar_body.h does not define (mixed dtypes, transcendental ops on integers, ...), so
// a body that passes here asks nothing of a backend beyond the header.
class EvalBuilder : public ScalarBuilder {
 public:
  ScalarValue input(const EvalValue& v) {
    values_.push_back(v);
    return {static_cast<int32_t>(values_.size() - 1)};
  }
  EvalValue at(ScalarValue v) const {
    KILN_CHECK(v.id >= 0 && static_cast<size_t>(v.id) < values_.size(),
               "[EvalBuilder] expected a value of this builder, found id ", v.id, ".");
    return values_[static_cast<size_t>(v.id)];
  }

  DType dtype(ScalarValue v) const override { return at(v).dtype; }

  ScalarValue constant(double value, DType t) override {
    EvalValue r{t};
    if (is_floating(t)) {
      r.f = round_to(value, t);
    } else if (t == DType::Bool) {
      r.i = value != 0;
    } else {
      double lo = static_cast<double>(int_min(t));
      KILN_CHECK(value == std::trunc(value) && value >= lo && value < -lo,
                 "[EvalBuilder] expected an integer constant within ", t, "'s range, found ", value,
                 ".");
      r.i = static_cast<int64_t>(value);
    }
    return input(r);
  }

  ScalarValue unary(ScalarOp op, ScalarValue a) override {
    EvalValue x = at(a), r{x.dtype};
    r.poison = x.poison;
    if (x.dtype == DType::Float32) {
      r.f = float_unary<float>(op, static_cast<float>(x.f));
    } else if (x.dtype == DType::Float64) {
      r.f = float_unary<double>(op, x.f);
    } else if (x.dtype == DType::Bool && op == ScalarOp::Not) {
      r.i = !x.i;
    } else if (is_integral(x.dtype) && (op == ScalarOp::Neg || op == ScalarOp::Abs)) {
      bool negate = op == ScalarOp::Neg || x.i < 0;
      r.i = negate ? wrap(0 - static_cast<uint64_t>(x.i), x.dtype) : x.i;
    } else {
      unsupported(op, x.dtype);
    }
    return input(r);
  }

  ScalarValue binary(ScalarOp op, ScalarValue a, ScalarValue b) override {
    EvalValue x = at(a), y = at(b);
    KILN_CHECK(x.dtype == y.dtype, "[EvalBuilder] expected the operands of ", scalar_op_name(op),
               " to share a dtype, found ", x.dtype, " and ", y.dtype, ".");
    EvalValue r{is_comparison(op) ? DType::Bool : x.dtype};
    r.poison = x.poison || y.poison;
    switch (x.dtype) {
      case DType::Float32:
        float_binary<float>(op, static_cast<float>(x.f), static_cast<float>(y.f), r);
        break;
      case DType::Float64:
        float_binary<double>(op, x.f, y.f, r);
        break;
      case DType::Bool:
        bool_binary(op, x.i != 0, y.i != 0, r);
        break;
      case DType::Int32:
      case DType::Int64:
        int_binary(op, x.i, y.i, x.dtype, r);
        break;
      default:
        unsupported(op, x.dtype);
    }
    return input(r);
  }

  ScalarValue select(ScalarValue cond, ScalarValue a, ScalarValue b) override {
    EvalValue c = at(cond), x = at(a), y = at(b);
    KILN_CHECK(c.dtype == DType::Bool && x.dtype == y.dtype,
               "[EvalBuilder] expected select(bool, T, T), found select(", c.dtype, ", ", x.dtype,
               ", ", y.dtype, ").");
    EvalValue r = c.i ? x : y;
    r.poison = r.poison || c.poison;
    return input(r);
  }

  // As the header says: float -> int truncates, -> bool is != 0 (NaN is true). float16 and
  // bfloat16 convert only to and from float32 (the other conversions would round twice in
  // eager, so a body must route them through float32 itself).
  ScalarValue cast(ScalarValue a, DType to) override {
    EvalValue x = at(a), r{to};
    r.poison = x.poison;
    DType from = x.dtype;
    if (from == to) return a;
    KILN_CHECK(!(is_half(from) || is_half(to)) || from == DType::Float32 || to == DType::Float32,
               "[EvalBuilder] expected float16/bfloat16 to convert through float32, found a cast "
               "from ",
               from, " to ", to, ".");
    if (to == DType::Bool) {
      r.i = is_floating(from) ? x.f != 0 : x.i != 0;
    } else if (is_floating(to)) {
      if (is_floating(from))
        r.f = round_to(x.f, to);
      else if (to == DType::Float32)
        r.f = static_cast<float>(x.i);  // one rounding
      else
        r.f = static_cast<double>(x.i);
    } else if (is_floating(from)) {
      double t = std::trunc(x.f), lo = static_cast<double>(int_min(to));
      if (std::isnan(t) || t < lo || t >= -lo)
        r.poison = true;
      else
        r.i = static_cast<int64_t>(t);
    } else {
      r.i = wrap(static_cast<uint64_t>(x.i), to);
    }
    return input(r);
  }

 private:
  std::vector<EvalValue> values_;
};

EvalValue run_body(ScalarBodyFn body, const Attrs& attrs, const std::vector<EvalValue>& operands) {
  EvalBuilder b;
  std::vector<ScalarValue> ids;
  for (const EvalValue& v : operands) ids.push_back(b.input(v));
  return b.at(body(b, attrs, ids));
}

// ---- inputs ----

using Column = std::vector<EvalValue>;  // one op input's value for every element

Column values(DType t, const std::vector<double>& vs) {
  Column c;
  for (double v : vs) {
    EvalValue e{t};
    if (is_floating(t))
      e.f = round_to(v, t);
    else
      e.i = static_cast<int64_t>(v);
    c.push_back(e);
  }
  return c;
}

Column int_values(DType t, const std::vector<int64_t>& vs) {
  Column c;
  for (int64_t v : vs) c.push_back(EvalValue{t, 0, wrap(static_cast<uint64_t>(v), t)});
  return c;
}

// Signed zeros, halves (rounding), values where the transcendental functions saturate or
// overflow (exp(89) in float32, exp(710) in float64), subnormals, the extremes, NaN and
// infinities, and a sweep through the range where the functions bend.
Column grid(DType t) {
  constexpr double kMaxD = std::numeric_limits<double>::max();
  constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min(),
                    kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min(),
                    kMax64 = std::numeric_limits<int64_t>::max();
  switch (t) {
    case DType::Bool:
      return int_values(t, {0, 1});
    case DType::Int32:
      return int_values(t, {0, 1, -1, 2, -2, 3, -5, 7, 100, -100, 46341, -46341, 65536, kMax32,
                            kMin32, kMin32 + 1, kMax32 - 1});
    case DType::Int64:
      // clang-format off
      return int_values(t, {0, 1, -1, 2, -2, 3, -5, 7, 100, -100, 3037000500, -3037000500,
                            9007199254740993, 4294967296, kMax64, kMin64, kMin64 + 1, kMax64 - 1,
                            kMax32, kMin32});
      // clang-format on
    default:
      break;
  }
  std::vector<double> v = {
      0.0,          -0.0,  1,     -1,    0.5,    -0.5,  1.5,    -1.5,   2.5,     -2.5,
      3.5,          -3.5,  2,     -2,    3,      -3,    0.1,    -0.1,   1e-3,    -1e-3,
      1e-8,         -1e-8, 7.25,  -7.25, 20,     -20,   88.5,   -88.5,  89,      -89,
      100,          -100,  -104,  709.5, -709.5, 710,   -710,   1e4,    -1e4,    1e20,
      -1e20,        3e38,  -3e38, 1e300, -1e300, 1e-40, -1e-40, 1e-310, -1e-310, kMaxD,
      -kMaxD,       kNaN,  -kNaN, kInf,  -kInf,  0.7,   0.99,   -0.99,  1e-30,   2147483647.5,
      -2147483648.5};
  for (int k = -42; k <= 42; ++k) v.push_back(k * 0.2371);
  return values(t, v);
}

// Every combination of the axes' values, one column per axis.
std::vector<Column> product(const std::vector<Column>& axes) {
  std::vector<Column> cols(axes.size());
  size_t n = 1;
  for (const Column& a : axes) n *= a.size();
  for (size_t e = 0; e < n; ++e) {
    size_t rest = e;
    for (size_t k = axes.size(); k-- > 0;) {
      cols[k].push_back(axes[k][rest % axes[k].size()]);
      rest /= axes[k].size();
    }
  }
  return cols;
}

// The runs of one op on dtype t: each a set of columns (an empty column is an absent
// optional input).
std::vector<std::vector<Column>> runs_for(const OpDef& op, DType t) {
  if (op.name == "where") return {product({grid(DType::Bool), grid(t), grid(t)})};
  if (op.name == "binary_cross_entropy_with_logits") {
    std::vector<Column> without = product({grid(t), values(t, {0, 1, 0.3})});
    without.push_back({});
    return {product({grid(t), values(t, {0, 1, 0.3}), values(t, {1, 2.5, 0.5})}), without};
  }
  return {product(std::vector<Column>(op.input_names.size(), grid(t)))};
}

// ---- attribute variants ----

struct Variant {
  std::string label;
  std::shared_ptr<const Attrs> attrs;
  bool floats_only = false;  // eager converts the bounds with an undefined cast on integers
};

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

template <class A, class F>
Variant variant(std::string label, F set, bool floats_only = false) {
  auto a = std::make_shared<A>();
  set(*a);
  return {std::move(label), a, floats_only};
}

std::vector<Variant> variants_for(const OpDef& op) {
  using namespace ops;
  std::vector<Variant> out;
  if (op.name == "gelu") {
    for (bool t : {false, true})
      out.push_back(
          variant<GeluAttrs>(t ? "tanh" : "erf", [=](auto& a) { a.tanh_approximation = t; }));
  } else if (op.name == "leaky_relu") {
    for (double s : {0.01, 0.2, 0.0, -0.5, 1.5})
      out.push_back(
          variant<LeakyReluAttrs>("slope " + num(s), [=](auto& a) { a.negative_slope = s; }));
  } else if (op.name == "elu") {
    for (double al : {1.0, 1.5, 0.3})
      out.push_back(variant<EluAttrs>("alpha " + num(al), [=](auto& a) { a.alpha = al; }));
  } else if (op.name == "pow_scalar") {
    for (double e : {2.0, 0.5, -1.0, 3.0, 0.0, 1.0, -0.5, 2.5, -2.0})
      out.push_back(
          variant<PowScalarAttrs>("exponent " + num(e), [=](auto& a) { a.exponent = e; }));
  } else if (op.name == "cast") {
    for (int d = 0; d < kNumDTypes; ++d) {
      DType to = static_cast<DType>(d);
      out.push_back(
          variant<CastAttrs>("to " + std::string(dtype_name(to)), [=](auto& a) { a.dtype = to; }));
    }
  } else if (op.name == "clamp") {
    using Bound = std::optional<double>;
    struct B {
      Bound lo, hi;
      bool floats_only;
    };
    for (B b : {B{-1.0, {}, false}, B{{}, 2.5, false}, B{-1.0, 2.5, false}, B{0.5, 0.5, false},
                B{2.0, -2.0, false}, B{-0.5, 1.7, false}, B{0.0, {}, false}, B{-0.0, 0.0, false},
                B{-1e30, 1e30, true}, B{kNaN, 1.0, true}}) {
      std::ostringstream label;
      label << "min " << (b.lo ? num(*b.lo) : "none") << " max " << (b.hi ? num(*b.hi) : "none");
      out.push_back(variant<ClampAttrs>(
          label.str(), [=](auto& a) { a.min = b.lo, a.max = b.hi; }, b.floats_only));
    }
  } else {
    out.push_back({"", std::shared_ptr<const Attrs>(op.attrs_prototype->clone())});
  }
  return out;
}

// ---- comparing with eager ----

// The eager paths a body is compared with: dense inputs go through Eigen's vectorized
// functions, strided ones through std:: functions (as the evaluator does).
enum class Path { Dense, Strided };

// What an error is measured in units of: ulps of the larger result, of |x| (gelu, silu:
// 1 + erf(x) and friends cancel for x << 0, so one ulp of erf moves the result by many of its
// own), or of 1 (sigmoid, whose Eigen version is accurate absolutely, not relatively).
enum class Scale { Result, Input, One };

double max_of(DType t) {
  return t == DType::Float64 ? DBL_MAX : FLT_MAX;
}
double min_normal(DType t) {
  return t == DType::Float64 ? DBL_MIN : FLT_MIN;
}

// Elements where eager is known to be off, and so are not compared (x is operand 0).
// Eigen's exp returns inf within a factor 2 of overflow (float32 exp(88.5) is 2.7e38).
bool eigen_exp_overflows(double x, DType t, Path p) {
  return p == Path::Dense && x > std::log(max_of(t) / 2);
}
// Eigen's log and rsqrt take subnormal inputs for the smallest normal (log(1e-40f) gives
// -87.3, not -92.1) or for zero (rsqrt(1e-310) gives inf, not 1e155).
bool eigen_flushes_subnormals(double x, DType t, Path p) {
  return p == Path::Dense && x != 0 && std::fabs(x) < min_normal(t);
}
// Eigen's AVX-512 fast-math sqrt computes x * rsqrt(x): NaN for inf, 0 for subnormals.
bool eigen_sqrt_breaks(double x, DType t, Path p) {
  return p == Path::Dense && (std::isinf(x) || eigen_flushes_subnormals(x, t, p));
}
// Both eager forms compute exp(-x), which overflows for x < -log(max): they give 0 there,
// where the body still gives exp(x) (sigmoid) and x * exp(x) (silu: -3.2e-37 at -88.5f).
bool exp_of_minus_x_overflows(double x, DType t, Path) {
  return -x > std::log(max_of(t));
}
// GCC contracts eager's (1 - t) * x + w * softplus(-x) into a fused multiply-add, which
// stays finite where the body's product alone overflows (|x| near the dtype's max).
bool eager_fma_avoids_overflow(double x, DType t, Path) {
  return std::fabs(x) > max_of(t) / 8;
}

struct Rule {
  double dense = 0, strided = 0;  // ulps allowed on each path; 0: the same bits
  Scale dense_scale = Scale::Result, strided_scale = Scale::Result;
  bool (*skip)(double x, DType t, Path p) = nullptr;
};

// Ops not listed here must match eager bit for bit on both paths (any NaN matches any NaN).
// The single-primitive ops match the strided path bit for bit (it calls the same std::
// function); what they allow on the dense path is Eigen's error.
const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> r = {
      {"exp", {.dense = 4, .skip = eigen_exp_overflows}},
      {"log", {.dense = 4, .skip = eigen_flushes_subnormals}},
      {"log1p", {.dense = 4}},
      // Eigen's AVX-512 sqrt is also an ulp off, and gives +0.0 for sqrt(-0.0).
      {"sqrt", {.dense = 4, .skip = eigen_sqrt_breaks}},
      {"rsqrt", {.dense = 4, .skip = eigen_flushes_subnormals}},
      {"sin", {.dense = 4}},
      {"cos", {.dense = 4}},
      {"tanh", {.dense = 4}},
      {"erf", {.dense = 4}},
      // The same steps; GCC contracts the eager polynomial and Newton steps into FMAs.
      {"erfinv", {.dense = 4, .strided = 4}},
      // The body computes exp(-|x|), eager exp(-x) (strided) or Eigen's logistic (dense).
      {"sigmoid", {4, 4, Scale::One, Scale::Result, exp_of_minus_x_overflows}},
      {"silu", {4, 4, Scale::Input, Scale::Result, exp_of_minus_x_overflows}},
      {"gelu", {4, 4, Scale::Input, Scale::Input}},
      {"elu", {4, 4}},  // tanh(x/2) * (exp(x) + 1) for std::expm1
      // Eager contracts products and sums into FMAs; the body rounds each.
      {"binary_cross_entropy_with_logits",
       {.dense = 4, .strided = 4, .skip = eager_fma_avoids_overflow}},
  };
  return r;
}

std::string show(const EvalValue& v) {
  std::ostringstream os;
  if (v.dtype == DType::Bool)
    os << (v.i ? "true" : "false");
  else if (is_floating(v.dtype))
    os << std::setprecision(17) << v.f;
  else
    os << v.i;
  return os.str();
}

bool same_bits(const EvalValue& a, const EvalValue& b) {
  if (!is_floating(a.dtype)) return a.i == b.i;
  if (std::isnan(a.f) || std::isnan(b.f)) return std::isnan(a.f) && std::isnan(b.f);
  return a.f == b.f && std::signbit(a.f) == std::signbit(b.f);
}

// Distance in ulps of max(|a|, |b|, scale); results that are both subnormal count as equal
// (Eigen flushes some of them to zero).
double ulps_apart(const EvalValue& a, const EvalValue& b, double scale) {
  if (same_bits(a, b)) return 0;
  if (std::isnan(a.f) || std::isnan(b.f) || std::isinf(a.f) || std::isinf(b.f)) return kInf;
  bool f64 = a.dtype == DType::Float64;
  double tiny = f64 ? DBL_MIN : FLT_MIN, eps = f64 ? DBL_EPSILON : FLT_EPSILON;
  if (std::fabs(a.f) < tiny && std::fabs(b.f) < tiny) return 0;
  return std::fabs(a.f - b.f) / (std::max({std::fabs(a.f), std::fabs(b.f), scale}) * eps);
}

Tensor make_tensor(const Column& col, bool strided) {
  if (col.empty()) return Tensor();
  DType t = col[0].dtype;
  int64_t n = static_cast<int64_t>(col.size()), step = strided ? 2 : 1;
  Tensor buf = Tensor::empty({n * step}, t);
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* p = buf.data_ptr<T>();
    for (int64_t k = 0; k < n * step; ++k) p[k] = T{};
    for (int64_t k = 0; k < n; ++k) {
      const EvalValue& v = col[static_cast<size_t>(k)];
      if constexpr (std::is_same_v<T, bool>)
        p[k * step] = v.i != 0;
      else if constexpr (std::is_integral_v<T>)
        p[k * step] = static_cast<T>(v.i);
      else if constexpr (std::is_same_v<T, double>)
        p[k * step] = v.f;
      else
        p[k * step] = T(static_cast<float>(v.f));
    }
  });
  return strided ? buf.alias({n}, {2}, 0) : buf;
}

Column read(const Tensor& t) {
  Column out;
  if (is_floating(t.dtype())) {
    for (double v : t.to_vector<double>()) out.push_back(EvalValue{t.dtype(), v});
  } else {
    for (int64_t v : t.to_vector<int64_t>()) out.push_back(EvalValue{t.dtype(), 0, v});
  }
  return out;
}

// The largest difference seen on one path, and where.
struct Worst {
  double ulps = 0;
  std::string where;
};

// Runs one op on one set of columns, eagerly (dense and strided) and through its body, and
// compares every element.
void check_run(const OpDef& op, const Variant& v, const std::vector<Column>& cols,
               std::map<std::string, Worst>& worst) {
  std::vector<Tensor> dense_in, strided_in;
  for (const Column& c : cols) {
    dense_in.push_back(make_tensor(c, false));
    strided_in.push_back(make_tensor(c, true));
  }
  TensorTypes types = infer_types(op, dense_in, *v.attrs);
  Column want_dense = read(dispatch1(op, dense_in, *v.attrs));
  Column want_strided = read(dispatch1(op, strided_in, *v.attrs));
  Rule rule = rules().count(op.name) ? rules().at(op.name) : Rule{};
  const size_t n = want_dense.size();
  int failures = 0;
  for (size_t e = 0; e < n; ++e) {
    std::vector<EvalValue> operands;
    std::string args;
    for (const Column& c : cols) {
      if (c.empty()) continue;
      operands.push_back(c[e]);
      args += (args.empty() ? "" : ", ") + show(c[e]);
    }
    EvalValue got = run_body(op.scalar_body, *v.attrs, operands);
    if (e == 0) {
      ASSERT_EQ(got.dtype, types[0].dtype) << op.name << " " << v.label;
    }
    if (got.poison) continue;
    const EvalValue& x = operands[0];
    const std::string where =
        std::string(dtype_name(x.dtype)) + (v.label.empty() ? "" : " ") + v.label;
    for (Path path : {Path::Dense, Path::Strided}) {
      const bool dense = path == Path::Dense;
      const EvalValue& want = dense ? want_dense[e] : want_strided[e];
      if (rule.skip && rule.skip(x.f, x.dtype, path)) continue;
      double allowed = dense ? rule.dense : rule.strided;
      Scale unit = dense ? rule.dense_scale : rule.strided_scale;
      double scale = unit == Scale::One ? 1 : unit == Scale::Input ? std::fabs(x.f) : 0;
      bool ok;
      if (allowed == 0 || !is_floating(got.dtype)) {
        ok = same_bits(got, want);
      } else {
        double d = ulps_apart(got, want, scale);
        Worst& w = worst[op.name + " " + where + (dense ? " dense" : " strided")];
        if (d > w.ulps) w = {d, "(" + args + "): body " + show(got) + ", eager " + show(want)};
        ok = d <= allowed;
      }
      if (!ok && ++failures <= 5) {
        ADD_FAILURE() << op.name << " " << where << (dense ? " dense" : " strided") << " (" << args
                      << "): body gives " << show(got) << ", eager " << show(want);
      }
    }
  }
  EXPECT_EQ(failures, 0) << op.name << " " << v.label << ": " << failures << " elements differ";
}

bool accepts(const OpDef& op, const Variant& v, const std::vector<Column>& cols) {
  std::vector<Tensor> one;
  for (const Column& c : cols) one.push_back(c.empty() ? Tensor() : make_tensor({c[0]}, false));
  try {
    infer_types(op, one, *v.attrs);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::vector<std::string> elementwise_op_names() {
  std::vector<std::string> names;
  for (const OpDef* op : all_ops())
    if (op->lowering == LoweringClass::Elementwise) names.push_back(op->name);
  return names;
}

class ScalarBodyMatchesEager : public ::testing::TestWithParam<std::string> {};

TEST_P(ScalarBodyMatchesEager, OnEveryDtypeAndVariant) {
  init();
  const OpDef& op = *find_op(GetParam());
  ASSERT_TRUE(op.scalar_body) << op.name << " has no scalar body";
  std::vector<DType> dtypes = {kFloat32, kFloat64, kInt32, kInt64, kBool};
  if (op.name == "cast") dtypes.insert(dtypes.end(), {kFloat16, kBFloat16});
  std::map<std::string, Worst> worst;
  int runs = 0;
  for (DType t : dtypes) {
    for (const Variant& v : variants_for(op)) {
      if (v.floats_only && !is_floating(t)) continue;
      for (const std::vector<Column>& cols : runs_for(op, t)) {
        if (!accepts(op, v, cols)) continue;
        check_run(op, v, cols, worst);
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 0) << op.name << " accepted none of the dtypes tried";
  for (const auto& [key, w] : worst)
    if (w.ulps > 0)
      std::cout << "[ScalarBody] " << key << ": max " << w.ulps << " ulp at " << w.where << "\n";
}

INSTANTIATE_TEST_SUITE_P(ScalarBody, ScalarBodyMatchesEager,
                         ::testing::ValuesIn(elementwise_op_names()),
                         [](const auto& info) { return info.param; });

TEST(ScalarBody, PrimitivesHaveDistinctNames) {
  std::set<std::string> names;
  for (int k = 0; k <= static_cast<int>(ScalarOp::Atan2); ++k) {
    std::string name = scalar_op_name(static_cast<ScalarOp>(k));
    EXPECT_NE(name, "?") << k;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

// Eager converts integer clamp bounds with an undefined cast when they lie outside the
// dtype (so the table leaves them out); the body drops a bound no value can cross and
// saturates one past the other end.
TEST(ScalarBody, ClampSaturatesIntegerBoundsOutsideTheDtype) {
  auto run = [](DType t, int64_t x, std::optional<double> lo, std::optional<double> hi) {
    ops::ClampAttrs a;
    a.min = lo, a.max = hi;
    return run_body(ops::clamp.scalar_body, a, {EvalValue{t, 0, x}}).i;
  };
  const int64_t min32 = std::numeric_limits<int32_t>::min(),
                max32 = std::numeric_limits<int32_t>::max();
  const int64_t min64 = std::numeric_limits<int64_t>::min(),
                max64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(run(kInt32, min32, -1e30, 1e30), min32);
  EXPECT_EQ(run(kInt32, max32, -1e30, 1e30), max32);
  EXPECT_EQ(run(kInt32, 5, 1e30, {}), max32);
  EXPECT_EQ(run(kInt32, 5, {}, -1e30), min32);
  EXPECT_EQ(run(kInt64, min64, -1e300, 1e300), min64);
  EXPECT_EQ(run(kInt64, max64, -1e300, 1e300), max64);
  EXPECT_EQ(run(kInt64, 5, {}, -1e300), min64);
  EXPECT_EQ(run(kInt64, max64, {}, 9.2233720368547748e18), 9223372036854774784);
}

// A fusion pass may mark binary_cross_entropy_with_logits' absent pos_weight with an
// invalid value instead of leaving it out.
TEST(ScalarBody, LogitsLossTreatsAnInvalidPosWeightAsAbsent) {
  ScalarBodyFn body = ops::binary_cross_entropy_with_logits.scalar_body;
  EvalBuilder b;
  ScalarValue x = b.constant(-1.25, kFloat32), t = b.constant(0.3, kFloat32);
  std::vector<ScalarValue> two = {x, t}, three = {x, t, ScalarValue{}};
  EXPECT_EQ(b.at(body(b, no_attrs(), two)).f, b.at(body(b, no_attrs(), three)).f);
}

// The evaluator is strict, so the bodies it accepts ask nothing the header does not define.
TEST(ScalarBody, EvaluatorRefusesWhatTheHeaderDoesNotDefine) {
  EvalBuilder b;
  ScalarValue f = b.constant(1.5, kFloat32), i = b.constant(2, kInt32), t = b.constant(1, kBool);
  expect_error([&] { b.add(f, i); }, {"[EvalBuilder]", "share a dtype", "float32", "int32"});
  expect_error([&] { b.unary(ScalarOp::Exp, i); }, {"exp", "int32"});
  expect_error([&] { b.add(t, t); }, {"add", "bool"});
  expect_error([&] { b.cast(b.constant(1, kFloat64), kFloat16); }, {"through float32"});
  expect_error([&] { b.constant(0.5, kInt64); }, {"integer constant"});
}

}  // namespace
}  // namespace kiln
