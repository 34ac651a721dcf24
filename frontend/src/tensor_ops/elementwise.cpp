// Elementwise functions: type promotion, scalar operands, operators and the vjps of the
// elementwise ops (written with kiln ops, so they can be differentiated and traced too).
#include "kiln/tensor_ops/elementwise.h"

#include <cmath>

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

// ---- type promotion (PyTorch's three tiers: dim tensors > 0-d tensors > scalars) ----

namespace {

int category(DType t) { return t == DType::Bool ? 0 : (is_integral(t) ? 1 : 2); }

// The higher tier wins unless the lower one is of a higher category.
DType combine_tiers(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower.value_or(default_dtype());
  if (!lower) return *higher;
  if (category(*lower) > category(*higher)) {
    // A float scalar joining integer tensors becomes the default float type.
    return category(*higher) == 0 && category(*lower) == 1 ? *lower : promote_types(*higher, *lower);
  }
  return *higher;
}

struct PromotionState {
  std::optional<DType> dim, zero_dim, wrapped;
  void add(const Tensor& t) {
    auto& slot = t.impl()->is_wrapped_number ? wrapped : (t.dim() > 0 ? dim : zero_dim);
    DType d = t.dtype();
    if (t.impl()->is_wrapped_number && is_floating(d)) d = default_dtype();
    slot = slot ? promote_types(*slot, d) : d;
  }
  DType result() const { return combine_tiers(dim, zero_dim ? std::optional<DType>(combine_tiers(zero_dim, wrapped)) : wrapped); }
};

DType scalar_dtype(Scalar s) { return s.is_floating() ? default_dtype() : s.kind(); }

Tensor promote(const Tensor& t, DType d) { return t.dtype() == d ? t : cast(t, d); }

Tensor binary(const OpDef& op, const Tensor& a, const Tensor& b, bool to_floating = false) {
  KILN_CHECK(a.defined() && b.defined(), "[", op.name, "] got an undefined tensor.");
  DType d = result_type(a, b);
  if (to_floating && !is_floating(d)) d = default_dtype();
  return detail::call1(op, {promote(a, d), promote(b, d)});
}

Tensor unary(const OpDef& op, const Tensor& x, const Attrs& attrs = no_attrs()) {
  KILN_CHECK(x.defined(), "[", op.name, "] got an undefined tensor.");
  return detail::call1(op, {x}, attrs);
}

// Integer and bool inputs of floating-only functions (exp, sqrt, ...) become float32,
// like PyTorch.
Tensor floating_unary(const OpDef& op, const Tensor& x, const Attrs& attrs = no_attrs()) {
  KILN_CHECK(x.defined(), "[", op.name, "] got an undefined tensor.");
  return detail::call1(op, {is_floating(x.dtype()) ? x : cast(x, default_dtype())}, attrs);
}

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  PromotionState s;
  s.add(a);
  s.add(b);
  return s.result();
}

DType result_type(const Tensor& a, Scalar b) {
  PromotionState s;
  s.add(a);
  s.wrapped = scalar_dtype(b);
  return s.result();
}

// On the host whatever `like`'s device: elementwise kernels on any device read a host scalar's
// value (infer::is_host_scalar), so x * 2 on a GPU copies nothing to it.
Tensor scalar_like(Scalar s, const Tensor& like) {
  Tensor t = Tensor::scalar(s, result_type(like, s));
  t.impl()->is_wrapped_number = true;
  return t;
}

// ---- functions ----

Tensor neg(const Tensor& x) { return unary(ops::neg, x); }
Tensor abs(const Tensor& x) { return unary(ops::abs, x); }
Tensor exp(const Tensor& x) { return floating_unary(ops::exp, x); }
Tensor log(const Tensor& x) { return floating_unary(ops::log, x); }
Tensor log1p(const Tensor& x) { return floating_unary(ops::log1p, x); }
Tensor sqrt(const Tensor& x) { return floating_unary(ops::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return floating_unary(ops::rsqrt, x); }
Tensor sin(const Tensor& x) { return floating_unary(ops::sin, x); }
Tensor cos(const Tensor& x) { return floating_unary(ops::cos, x); }
Tensor tanh(const Tensor& x) { return floating_unary(ops::tanh, x); }
Tensor sigmoid(const Tensor& x) { return floating_unary(ops::sigmoid, x); }
Tensor relu(const Tensor& x) { return unary(ops::relu, x); }
Tensor silu(const Tensor& x) { return floating_unary(ops::silu, x); }
Tensor erf(const Tensor& x) { return floating_unary(ops::erf, x); }
Tensor erfinv(const Tensor& x) { return floating_unary(ops::erfinv, x); }
Tensor square(const Tensor& x) { return unary(ops::square, x.dtype() == DType::Bool ? cast(x, kInt64) : x); }
Tensor reciprocal(const Tensor& x) { return floating_unary(ops::reciprocal, x); }
Tensor sign(const Tensor& x) { return unary(ops::sign, x); }
Tensor floor(const Tensor& x) { return unary(ops::floor, x); }
Tensor ceil(const Tensor& x) { return unary(ops::ceil, x); }
Tensor round(const Tensor& x) { return unary(ops::round, x); }

const char* gelu_approximation_name(GeluApproximation approximate) {
  return approximate == GeluApproximation::Tanh ? "tanh" : "none";
}

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  ops::GeluAttrs a;
  a.tanh_approximation = approximate == GeluApproximation::Tanh;
  return floating_unary(ops::gelu, x, a);
}
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  ops::LeakyReluAttrs a;
  a.negative_slope = negative_slope;
  return floating_unary(ops::leaky_relu, x, a);
}
Tensor elu(const Tensor& x, double alpha) {
  ops::EluAttrs a;
  a.alpha = alpha;
  return floating_unary(ops::elu, x, a);
}
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  ops::ClampAttrs a;
  if (min) a.min = min->to_double();
  if (max) a.max = max->to_double();
  bool float_bound = (min && min->is_floating()) || (max && max->is_floating());
  Tensor in = float_bound && !is_floating(x.dtype()) ? cast(x, default_dtype()) : x;
  return unary(ops::clamp, in, a);
}
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  KILN_CHECK(x.defined(), "[clamp] got an undefined tensor.");
  Tensor out = min.defined() ? maximum(x, min) : x;
  return max.defined() ? minimum(out, max) : out;
}
Tensor lerp(const Tensor& a, const Tensor& b, Scalar weight) {
  const double w = weight.to_double();
  return w < 0.5 ? a + (b - a) * weight : b - (b - a) * (1 - w);
}
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight) {
  const Tensor diff = b - a;
  return where(weight < 0.5, a + weight * diff, b - diff * (1 - weight));
}
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) {
  return value.to_double() == 1 ? x + t1 * t2 : x + t1 * t2 * value;
}
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) {
  return value.to_double() == 1 ? x + t1 / t2 : x + t1 / t2 * value;
}
Tensor pow(const Tensor& x, Scalar exponent) {
  ops::PowScalarAttrs a;
  a.exponent = exponent.to_double();
  return floating_unary(ops::pow_scalar, x, a);
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary(ops::pow, a, b, true); }
Tensor atan2(const Tensor& a, const Tensor& b) { return binary(ops::atan2, a, b, true); }
Tensor cast(const Tensor& x, DType dtype) {
  ops::CastAttrs a;
  a.dtype = dtype;
  return unary(ops::cast, x, a);
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(ops::add, a, b); }
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return alpha.to_double() == 1 ? add(a, b) : add(a, b * alpha);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() != DType::Bool || b.dtype() != DType::Bool,
             "[sub] subtracting bool tensors is not supported. Fix: use logical_xor-style ops, or convert with .to().");
  return binary(ops::sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary(ops::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(ops::div, a, b, true); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(ops::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(ops::minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(ops::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(ops::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(ops::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(ops::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(ops::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(ops::ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(ops::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(ops::logical_or, a, b); }
Tensor logical_not(const Tensor& x) { return unary(ops::logical_not, x); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  KILN_CHECK(cond.defined() && a.defined() && b.defined(), "[where] got an undefined tensor.");
  DType d = result_type(a, b);
  Tensor c = cond.dtype() == DType::Bool ? cond : ne(cond, scalar_like(0, cond));
  return detail::call1(ops::where, {c, promote(a, d), promote(b, d)});
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) { return where(cond, a, scalar_like(b, a)); }
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) { return where(cond, scalar_like(a, b), b); }

Tensor sum_to(const Tensor& grad, IntList shape) {
  if (grad.sizes().size() == shape.size() && std::equal(shape.begin(), shape.end(), grad.sizes().begin()))
    return grad;
  int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  KILN_CHECK(lead >= 0, "sum_to: cannot sum ", shape_str(grad.sizes()), " to the larger shape ", shape_str(shape), ".");
  Shape dims;
  for (int64_t i = 0; i < grad.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && grad.sizes()[i] != 1)) dims.push_back(i);
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  return lead > 0 || r.dim() != static_cast<int64_t>(shape.size()) ? r.reshape(shape) : r;
}

// ---- operators ----

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator!(const Tensor& x) { return logical_not(x); }

#define KILN_DEFINE_BINARY_OPERATOR(OP, FN)                                                        \
  Tensor operator OP(const Tensor& a, const Tensor& b) { return FN(a, b); }                        \
  Tensor operator OP(const Tensor& a, Scalar b) { return FN(a, scalar_like(b, a)); }               \
  Tensor operator OP(Scalar a, const Tensor& b) { return FN(scalar_like(a, b), b); }
KILN_DEFINE_BINARY_OPERATOR(+, add)
KILN_DEFINE_BINARY_OPERATOR(-, sub)
KILN_DEFINE_BINARY_OPERATOR(*, mul)
KILN_DEFINE_BINARY_OPERATOR(/, div)
KILN_DEFINE_BINARY_OPERATOR(==, eq)
KILN_DEFINE_BINARY_OPERATOR(!=, ne)
KILN_DEFINE_BINARY_OPERATOR(<, lt)
KILN_DEFINE_BINARY_OPERATOR(<=, le)
KILN_DEFINE_BINARY_OPERATOR(>, gt)
KILN_DEFINE_BINARY_OPERATOR(>=, ge)
KILN_DEFINE_BINARY_OPERATOR(&, logical_and)
KILN_DEFINE_BINARY_OPERATOR(|, logical_or)
#undef KILN_DEFINE_BINARY_OPERATOR

// ---- vjps ----

namespace {

const Tensor& x_of(const VjpCall& c) { return c.inputs[0]; }
const Tensor& g_of(const VjpCall& c) { return c.grad_outputs[0]; }
const Tensor& y_of(const VjpCall& c) { return c.outputs[0]; }
Tensors one(Tensor t) { return Tensors{std::move(t)}; }
// A float mask (1 where cond) in g's dtype.
Tensor mask_as(const Tensor& cond, const Tensor& like) { return cast(cond, like.dtype()); }

Tensors vjp_neg(const VjpCall& c) { return one(-g_of(c)); }
Tensors vjp_abs(const VjpCall& c) { return one(g_of(c) * sign(x_of(c))); }
Tensors vjp_exp(const VjpCall& c) { return one(g_of(c) * y_of(c)); }
Tensors vjp_log(const VjpCall& c) { return one(g_of(c) / x_of(c)); }
Tensors vjp_log1p(const VjpCall& c) { return one(g_of(c) / (x_of(c) + 1)); }
Tensors vjp_sqrt(const VjpCall& c) { return one(g_of(c) / (y_of(c) * 2)); }
Tensors vjp_rsqrt(const VjpCall& c) { return one(g_of(c) * pow(y_of(c), 3) * -0.5); }
Tensors vjp_sin(const VjpCall& c) { return one(g_of(c) * cos(x_of(c))); }
Tensors vjp_cos(const VjpCall& c) { return one(-(g_of(c) * sin(x_of(c)))); }
Tensors vjp_tanh(const VjpCall& c) { return one(g_of(c) * (1 - square(y_of(c)))); }
Tensors vjp_sigmoid(const VjpCall& c) { return one(g_of(c) * (y_of(c) * (1 - y_of(c)))); }
Tensors vjp_relu(const VjpCall& c) { return one(g_of(c) * mask_as(x_of(c) > 0, g_of(c))); }
Tensors vjp_silu(const VjpCall& c) {
  const Tensor& x = x_of(c);
  Tensor s = sigmoid(x);
  return one(g_of(c) * (s * (1 + x * (1 - s))));
}
Tensors vjp_erf(const VjpCall& c) {
  return one(g_of(c) * (exp(-square(x_of(c))) * (2.0 / std::sqrt(M_PI))));
}
// d/dy erfinv(y) = sqrt(pi) / 2 * exp(erfinv(y)^2).
Tensors vjp_erfinv(const VjpCall& c) {
  return one(g_of(c) * (exp(square(y_of(c))) * (std::sqrt(M_PI) / 2)));
}
Tensors vjp_square(const VjpCall& c) { return one(g_of(c) * x_of(c) * 2); }
Tensors vjp_reciprocal(const VjpCall& c) { return one(-g_of(c) / square(x_of(c))); }
Tensors vjp_zero(const VjpCall& c) { return one(zeros_like(g_of(c))); }
Tensors vjp_gelu(const VjpCall& c) {
  const Tensor& x = x_of(c);
  if (static_cast<const ops::GeluAttrs&>(c.attrs).tanh_approximation) {
    const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
    Tensor t = tanh((x + pow(x, 3) * a) * k);
    Tensor d = (1 + t) * 0.5 + x * 0.5 * (1 - square(t)) * k * (1 + square(x) * (3 * a));
    return one(g_of(c) * d);
  }
  Tensor cdf = (1 + erf(x * M_SQRT1_2)) * 0.5;
  Tensor pdf = exp(square(x) * -0.5) * (1.0 / std::sqrt(2 * M_PI));
  return one(g_of(c) * (cdf + x * pdf));
}
Tensors vjp_leaky_relu(const VjpCall& c) {
  double s = static_cast<const ops::LeakyReluAttrs&>(c.attrs).negative_slope;
  return one(where(x_of(c) > 0, g_of(c), g_of(c) * s));
}
Tensors vjp_elu(const VjpCall& c) {
  double a = static_cast<const ops::EluAttrs&>(c.attrs).alpha;
  const Tensor& x = x_of(c);
  return one(where(x > 0, g_of(c), g_of(c) * exp(x) * a));
}
Tensors vjp_clamp(const VjpCall& c) {
  const auto& a = static_cast<const ops::ClampAttrs&>(c.attrs);
  const Tensor& x = x_of(c);
  Tensor pass = ones_like(x).to(DType::Bool);
  if (a.min) pass = pass & (x >= *a.min);
  if (a.max) pass = pass & (x <= *a.max);
  return one(g_of(c) * mask_as(pass, g_of(c)));
}
Tensors vjp_pow_scalar(const VjpCall& c) {
  double e = static_cast<const ops::PowScalarAttrs&>(c.attrs).exponent;
  if (e == 0) return one(zeros_like(g_of(c)));
  return one(g_of(c) * pow(x_of(c), e - 1) * e);
}
Tensors vjp_cast(const VjpCall& c) { return one(cast(g_of(c), c.input_types[0].dtype)); }

// Binary vjps reduce each gradient back over the dims its input was broadcast along.
IntList shape_a(const VjpCall& c) { return c.input_types[0].shape; }
IntList shape_b(const VjpCall& c) { return c.input_types[1].shape; }
Tensors two(const VjpCall& c, const Tensor& ga, const Tensor& gb) {
  return Tensors{c.needs(0) ? sum_to(ga, shape_a(c)) : Tensor(), c.needs(1) ? sum_to(gb, shape_b(c)) : Tensor()};
}

Tensors vjp_add(const VjpCall& c) { return two(c, g_of(c), g_of(c)); }
Tensors vjp_sub(const VjpCall& c) { return two(c, g_of(c), c.needs(1) ? -g_of(c) : Tensor()); }
Tensors vjp_mul(const VjpCall& c) {
  const Tensor& g = g_of(c);
  return two(c, c.needs(0) ? g * c.inputs[1] : Tensor(), c.needs(1) ? g * c.inputs[0] : Tensor());
}
Tensors vjp_div(const VjpCall& c) {
  const Tensor &g = g_of(c), &a = c.inputs[0], &b = c.inputs[1];
  return two(c, c.needs(0) ? g / b : Tensor(), c.needs(1) ? -g * a / square(b) : Tensor());
}
Tensors vjp_pow(const VjpCall& c) {
  const Tensor &g = g_of(c), &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs(0)) ga = g * b * pow(a, b - 1);
  if (c.needs(1)) {
    // d/db a^b = a^b log a; at a == 0 (where log is -inf) the limit is 0 for b > 0.
    Tensor safe_log = log(where(a == 0, ones_like(a), a));
    gb = g * pow(a, b) * safe_log;
  }
  return two(c, ga, gb);
}
// d atan2(a, b) = (b da - a db) / (a^2 + b^2); NaN at the origin, as in PyTorch.
Tensors vjp_atan2(const VjpCall& c) {
  const Tensor &g = g_of(c), &a = c.inputs[0], &b = c.inputs[1];
  Tensor scale = g / (square(a) + square(b));
  return two(c, c.needs(0) ? scale * b : Tensor(), c.needs(1) ? -(scale * a) : Tensor());
}
// Ties split the gradient equally, as in PyTorch.
Tensors vjp_max_min(const VjpCall& c, bool is_max) {
  const Tensor &g = g_of(c), &a = c.inputs[0], &b = c.inputs[1];
  Tensor a_wins = mask_as(is_max ? a > b : a < b, g) + mask_as(a == b, g) * 0.5;
  return two(c, c.needs(0) ? g * a_wins : Tensor(), c.needs(1) ? g * (1 - a_wins) : Tensor());
}
Tensors vjp_maximum(const VjpCall& c) { return vjp_max_min(c, true); }
Tensors vjp_minimum(const VjpCall& c) { return vjp_max_min(c, false); }
Tensors vjp_where(const VjpCall& c) {
  const Tensor &g = g_of(c), &cond = c.inputs[0];
  Tensor zero = zeros_like(g);
  Tensor ga = c.needs(1) ? sum_to(where(cond, g, zero), c.input_types[1].shape) : Tensor();
  Tensor gb = c.needs(2) ? sum_to(where(cond, zero, g), c.input_types[2].shape) : Tensor();
  return Tensors{Tensor(), ga, gb};
}

}  // namespace

namespace detail {

void register_elementwise_vjps() {
  // What each vjp reads: by default every input.
  set_vjp(ops::neg, vjp_neg, kSavesNothing);
  set_vjp(ops::abs, vjp_abs);
  set_vjp(ops::exp, vjp_exp, kSavesOutput);
  set_vjp(ops::log, vjp_log);
  set_vjp(ops::log1p, vjp_log1p);
  set_vjp(ops::sqrt, vjp_sqrt, kSavesOutput);
  set_vjp(ops::rsqrt, vjp_rsqrt, kSavesOutput);
  set_vjp(ops::sin, vjp_sin);
  set_vjp(ops::cos, vjp_cos);
  set_vjp(ops::tanh, vjp_tanh, kSavesOutput);
  set_vjp(ops::sigmoid, vjp_sigmoid, kSavesOutput);
  set_vjp(ops::relu, vjp_relu);
  set_vjp(ops::silu, vjp_silu);
  set_vjp(ops::erf, vjp_erf);
  set_vjp(ops::erfinv, vjp_erfinv, kSavesOutput);
  set_vjp(ops::square, vjp_square);
  set_vjp(ops::reciprocal, vjp_reciprocal);
  set_vjp(ops::sign, vjp_zero, kSavesNothing);
  set_vjp(ops::floor, vjp_zero, kSavesNothing);
  set_vjp(ops::ceil, vjp_zero, kSavesNothing);
  set_vjp(ops::round, vjp_zero, kSavesNothing);
  set_vjp(ops::gelu, vjp_gelu);
  set_vjp(ops::leaky_relu, vjp_leaky_relu);
  set_vjp(ops::elu, vjp_elu);
  set_vjp(ops::clamp, vjp_clamp);
  set_vjp(ops::pow_scalar, vjp_pow_scalar);
  set_vjp(ops::cast, vjp_cast);
  set_vjp(ops::add, vjp_add, kSavesNothing);
  set_vjp(ops::sub, vjp_sub, kSavesNothing);
  set_vjp(ops::mul, vjp_mul);
  set_vjp(ops::div, vjp_div);
  set_vjp(ops::pow, vjp_pow);
  set_vjp(ops::atan2, vjp_atan2);
  set_vjp(ops::maximum, vjp_maximum);
  set_vjp(ops::minimum, vjp_minimum);
  // where's vjp reads only the condition.
  set_vjp(ops::where, vjp_where, {.inputs = 1});
}

}  // namespace detail
}  // namespace kiln
