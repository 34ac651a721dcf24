// Elementwise tensor functions and C++ operators. Binary functions promote their operands
// like PyTorch (result_type) and broadcast them; scalars participate as weak types
// (an int32 tensor + 2 stays int32; + 2.5 becomes float32).
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// The dtype PyTorch would compute `a op b` in.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, Scalar b);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);

// GELU's form, as PyTorch's approximate="none" / "tanh": the exact x * Phi(x) with erf, or
// its tanh approximation.
enum class GeluApproximation { None, Tanh };
const char* gelu_approximation_name(GeluApproximation approximate);  // "none", "tanh"
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);

Tensor silu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor erf(const Tensor& x);
// The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside); float32 within a few ulp,
// float64 within about 1e-15 relative except near +-1 (docs/modules.md has the figures).
Tensor erfinv(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// Elementwise bounds (either may be undefined: no bound), broadcast against x; where
// min > max the result is max, as in PyTorch.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
// a + weight * (b - a), computed as b - (1 - weight) * (b - a) where weight >= 0.5 (exact at
// weight 1, as PyTorch's lerp).
Tensor lerp(const Tensor& a, const Tensor& b, Scalar weight);
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight);
// x + value * t1 * t2, and x + value * t1 / t2.
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor pow(const Tensor& x, Scalar exponent);
Tensor pow(const Tensor& a, const Tensor& b);
// The angle of the point (b, a) in [-pi, pi] (std::atan2(a, b) elementwise); integers
// become float32.
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor cast(const Tensor& x, DType dtype);

Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give floats
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);

// A 0-d tensor for `s` that promotes as a weak scalar against `like`.
Tensor scalar_like(Scalar s, const Tensor& like);

// Sums `grad` over broadcast dims so it has `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& grad, IntList shape);

// ---- operators (a Scalar on either side works for the arithmetic ones) ----
Tensor operator-(const Tensor& x);
Tensor operator!(const Tensor& x);  // logical_not
#define KILN_DECLARE_BINARY_OPERATOR(OP)              \
  Tensor operator OP(const Tensor& a, const Tensor& b); \
  Tensor operator OP(const Tensor& a, Scalar b);        \
  Tensor operator OP(Scalar a, const Tensor& b);
KILN_DECLARE_BINARY_OPERATOR(+)
KILN_DECLARE_BINARY_OPERATOR(-)
KILN_DECLARE_BINARY_OPERATOR(*)
KILN_DECLARE_BINARY_OPERATOR(/)
KILN_DECLARE_BINARY_OPERATOR(==)
KILN_DECLARE_BINARY_OPERATOR(!=)
KILN_DECLARE_BINARY_OPERATOR(<)
KILN_DECLARE_BINARY_OPERATOR(<=)
KILN_DECLARE_BINARY_OPERATOR(>)
KILN_DECLARE_BINARY_OPERATOR(>=)
KILN_DECLARE_BINARY_OPERATOR(&)
KILN_DECLARE_BINARY_OPERATOR(|)
#undef KILN_DECLARE_BINARY_OPERATOR

}  // namespace kiln
