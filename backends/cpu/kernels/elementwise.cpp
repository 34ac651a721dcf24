// CPU kernels for the elementwise ops. Dense float inputs go through Eigen's vectorized
// array functions; everything else through the strided loops of loops.h.
#include "eigen_maps.h"

#include <unsupported/Eigen/SpecialFunctions>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/view.h"
#include "loops.h"
#include "wrapping.h"

namespace kiln::cpu::kernels {

namespace {

bool dense_same_shape(const Tensor& out, const Tensor& x) {
  return out.is_contiguous() && x.is_contiguous() && out.sizes().size() == x.sizes().size() &&
         std::equal(out.sizes().begin(), out.sizes().end(), x.sizes().begin());
}

// Runs an Eigen array expression over dense data in parallel chunks.
template <class T, class Expr>
void dense_unary(const Tensor& out, const Tensor& x, Expr expr) {
  T* o = static_cast<T*>(out.raw_data());
  const T* in = static_cast<const T*>(x.raw_data());
  parallel_for(0, out.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
    ArrayMap<T>(o + b, e - b) = expr(ConstArrayMap<T>(in + b, e - b));
  });
}

// A unary op given as a scalar function and, optionally, an Eigen array expression.
template <class T, class Scalar, class Array>
void unary_impl(KernelCall& c, Scalar scalar, Array array) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  if constexpr (!std::is_same_v<Array, std::nullptr_t>) {
    if (dense_same_shape(out, x)) {
      dense_unary<T>(out, x, array);
      return;
    }
  }
  unary_loop<T, T>(out, x, scalar);
}

template <class F>
void floating_unary(KernelCall& c, F body) {
  visit_floating_dtype(c.inputs[0].dtype(), c.op.name.c_str(), [&](auto tag) { body(tag); });
}

template <class F>
void numeric_unary(KernelCall& c, F body) {
  visit_compute_dtype(c.inputs[0].dtype(), c.op.name.c_str(), [&](auto tag) {
    if constexpr (!std::is_same_v<decltype(tag), bool>) body(tag);
  });
}

#define KILN_FLOAT_UNARY(NAME, SCALAR, ARRAY)                                 \
  void NAME##_kernel(KernelCall& c) {                                         \
    floating_unary(c, [&](auto tag) {                                         \
      using T = decltype(tag);                                                \
      unary_impl<T>(c, [](T x) -> T { return SCALAR; },                       \
                    [](const auto& x) { return ARRAY; });                     \
    });                                                                       \
  }

KILN_FLOAT_UNARY(exp, std::exp(x), x.exp())
KILN_FLOAT_UNARY(log, std::log(x), x.log())
KILN_FLOAT_UNARY(log1p, std::log1p(x), x.log1p())
// Eigen 3.4's vectorized sqrt (x * rsqrt(x) under its fast math) makes sqrt(inf) NaN.
KILN_FLOAT_UNARY(sqrt, std::sqrt(x), (x == std::numeric_limits<T>::infinity()).select(x, x.sqrt()))
KILN_FLOAT_UNARY(rsqrt, T(1) / std::sqrt(x), x.rsqrt())
KILN_FLOAT_UNARY(sin, std::sin(x), x.sin())
KILN_FLOAT_UNARY(cos, std::cos(x), x.cos())
KILN_FLOAT_UNARY(tanh, std::tanh(x), x.tanh())
KILN_FLOAT_UNARY(sigmoid, T(1) / (T(1) + std::exp(-x)), x.logistic())
// silu(-inf) is NaN (-inf * 0) on every CPU, as the scalar form and PyTorch give: Eigen's
// vectorized logistic(-inf) is 0 with AVX-512 but a tiny positive number with AVX2 (its exp
// clamps its argument), which alone would make it -inf there.
KILN_FLOAT_UNARY(silu, x / (T(1) + std::exp(-x)),
                 (x == -std::numeric_limits<T>::infinity())
                     .select(std::numeric_limits<T>::quiet_NaN(), x * x.logistic()))
KILN_FLOAT_UNARY(erf, std::erf(x), Eigen::erf(x))
KILN_FLOAT_UNARY(reciprocal, T(1) / x, x.inverse())
#undef KILN_FLOAT_UNARY

// The steps of erfinv's scalar body (runtime/src/ops/scalar_bodies.cpp), in T, taking only
// the branch the body's selects keep.
template <class T>
T erfinv_of(T y) {
  namespace steps = ops::erfinv_steps;
  auto horner = [](T w, const auto& coefficients) {
    T p = static_cast<T>(coefficients[0]);
    for (size_t k = 1; k < coefficients.size(); ++k) p = static_cast<T>(coefficients[k]) + p * w;
    return p;
  };
  const T a = std::abs(y), q = T(1) - a;
  const T w = -std::log(q * (T(1) + a));
  T r = (w < T(5) ? horner(w - T(2.5), steps::kCentre) : horner(std::sqrt(w) - T(3), steps::kTail)) * a;
  if constexpr (std::is_same_v<T, double>) {
    const T minus_log_q = -std::log(q);
    if (!(w < steps::kAsymptoticFrom))
      r = std::sqrt(minus_log_q - 0.5 * std::log(M_PI * minus_log_q));
    for (int step = 0; step < steps::kNewtonSteps; ++step) {
      if (r < steps::kTailFrom) {
        r = r - (std::erf(r) - a) / (M_2_SQRTPI * std::exp(-(r * r)));
      } else {
        T t = r;
        for (int k = steps::kFractionTerms; k >= 1; --k) t = r + (k / 2.0) / t;
        const T fraction = 1 / t;
        const T log_erfc = (-(r * r) - 0.5 * std::log(M_PI)) + std::log(fraction);
        r = r + (log_erfc + minus_log_q) * (fraction * 0.5);
      }
    }
  }
  if (std::abs(y) == T(1)) return y * std::numeric_limits<T>::infinity();
  if (y == T(0)) return y;
  return y < T(0) ? -r : r;
}
void erfinv_kernel(KernelCall& c) {
  floating_unary(c, [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(c.outputs[0], c.inputs[0], [](T y) { return erfinv_of(y); });
  });
}

#define KILN_NUMERIC_UNARY(NAME, SCALAR)                                         \
  void NAME##_kernel(KernelCall& c) {                                            \
    numeric_unary(c, [&](auto tag) {                                             \
      using T = decltype(tag);                                                   \
      unary_loop<T, T>(c.outputs[0], c.inputs[0], [](T x) -> T { return SCALAR; }); \
    });                                                                          \
  }

KILN_NUMERIC_UNARY(neg, wrapping_neg(x))
KILN_NUMERIC_UNARY(abs, x < T(0) ? wrapping_neg(x) : x)
KILN_NUMERIC_UNARY(relu, x > T(0) ? x : T(0))
KILN_NUMERIC_UNARY(square, wrapping_mul(x, x))
KILN_NUMERIC_UNARY(sign, static_cast<T>((x > T(0)) - (x < T(0))))
#undef KILN_NUMERIC_UNARY

// floor/ceil/round are the identity on integers.
template <class F>
void rounding(KernelCall& c, F f) {
  numeric_unary(c, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      unary_loop<T, T>(c.outputs[0], c.inputs[0], [&](T x) -> T { return f(x); });
    } else {
      unary_loop<T, T>(c.outputs[0], c.inputs[0], [](T x) { return x; });
    }
  });
}
void floor_kernel(KernelCall& c) { rounding(c, [](auto x) { return std::floor(x); }); }
void ceil_kernel(KernelCall& c) { rounding(c, [](auto x) { return std::ceil(x); }); }
void round_kernel(KernelCall& c) { rounding(c, [](auto x) { return std::nearbyint(x); }); }  // half to even

void gelu_kernel(KernelCall& c) {
  bool tanh_form = static_cast<const ops::GeluAttrs&>(c.attrs).tanh_approximation;
  floating_unary(c, [&](auto tag) {
    using T = decltype(tag);
    if (tanh_form) {
      const T k = static_cast<T>(0.7978845608028654), a = static_cast<T>(0.044715);
      unary_impl<T>(c, [=](T x) -> T { return T(0.5) * x * (T(1) + std::tanh(k * (x + a * x * x * x))); },
                    [=](const auto& x) { return T(0.5) * x * (T(1) + (k * (x + a * x * x * x)).tanh()); });
    } else {
      const T r = static_cast<T>(0.7071067811865476);
      unary_impl<T>(c, [=](T x) -> T { return T(0.5) * x * (T(1) + std::erf(x * r)); },
                    [=](const auto& x) { return T(0.5) * x * (T(1) + Eigen::erf(x * r)); });
    }
  });
}

void leaky_relu_kernel(KernelCall& c) {
  double slope = static_cast<const ops::LeakyReluAttrs&>(c.attrs).negative_slope;
  floating_unary(c, [&](auto tag) {
    using T = decltype(tag);
    const T s = static_cast<T>(slope);
    unary_loop<T, T>(c.outputs[0], c.inputs[0], [=](T x) { return x > T(0) ? x : x * s; });
  });
}

void elu_kernel(KernelCall& c) {
  double alpha = static_cast<const ops::EluAttrs&>(c.attrs).alpha;
  floating_unary(c, [&](auto tag) {
    using T = decltype(tag);
    const T a = static_cast<T>(alpha);
    unary_loop<T, T>(c.outputs[0], c.inputs[0], [=](T x) { return x > T(0) ? x : a * std::expm1(x); });
  });
}

void clamp_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::ClampAttrs&>(c.attrs);
  numeric_unary(c, [&](auto tag) {
    using T = decltype(tag);
    // Integer tensors clamp to bounds rounded toward the inside of the range.
    const T lo = a.min ? static_cast<T>(std::is_floating_point_v<T> ? *a.min : std::ceil(*a.min)) : T(0);
    const T hi = a.max ? static_cast<T>(std::is_floating_point_v<T> ? *a.max : std::floor(*a.max)) : T(0);
    const bool has_lo = a.min.has_value(), has_hi = a.max.has_value();
    unary_loop<T, T>(c.outputs[0], c.inputs[0], [=](T x) {
      if (has_lo && x < lo) x = lo;  // NaN stays NaN: comparisons with NaN are false
      if (has_hi && x > hi) x = hi;
      return x;
    });
  });
}

void pow_scalar_kernel(KernelCall& c) {
  double e = static_cast<const ops::PowScalarAttrs&>(c.attrs).exponent;
  floating_unary(c, [&](auto tag) {
    using T = decltype(tag);
    const T et = static_cast<T>(e);
    if (e == 2) {
      unary_loop<T, T>(c.outputs[0], c.inputs[0], [](T x) { return x * x; });
    } else if (e == 0.5) {
      unary_loop<T, T>(c.outputs[0], c.inputs[0], [](T x) { return std::sqrt(x); });
    } else {
      unary_loop<T, T>(c.outputs[0], c.inputs[0], [=](T x) { return std::pow(x, et); });
    }
  });
}

template <class S, class D>
D convert(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return static_cast<float>(v) != 0.0f || (std::is_integral_v<S> && v != S{});
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(v));
  } else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
    return static_cast<D>(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

void cast_kernel(KernelCall& c) {
  visit_dtype(c.inputs[0].dtype(), [&](auto src) {
    using S = decltype(src);
    visit_dtype(c.outputs[0].dtype(), [&](auto dst) {
      using D = decltype(dst);
      unary_loop<D, S>(c.outputs[0], c.inputs[0], [](S v) { return convert<S, D>(v); });
    });
  });
}

// ---- binary ----

template <class F>
void binary_same(KernelCall& c, F f, bool allow_bool) {
  visit_compute_dtype(c.inputs[0].dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      KILN_CHECK(allow_bool, "[", c.op.name, "] has no kernel for bool.");
      binary_loop<T, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [&](T a, T b) { return static_cast<T>(f(a, b)); });
    } else {
      binary_loop<T, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [&](T a, T b) { return static_cast<T>(f(a, b)); });
    }
  });
}

void add_kernel(KernelCall& c) {
  visit_compute_dtype(c.inputs[0].dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      binary_loop<T, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [](T a, T b) { return a || b; });
    } else {
      binary_loop<T, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [](T a, T b) {
        return wrapping_add(a, b);
      });
    }
  });
}
void mul_kernel(KernelCall& c) {
  visit_compute_dtype(c.inputs[0].dtype(), "mul", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      binary_loop<T, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [](T a, T b) { return a && b; });
    } else {
      binary_loop<T, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [](T a, T b) {
        return wrapping_mul(a, b);
      });
    }
  });
}
void sub_kernel(KernelCall& c) {
  binary_same(c, [](auto a, auto b) { return wrapping_sub(a, b); }, false);
}
void div_kernel(KernelCall& c) { binary_same(c, [](auto a, auto b) { return a / b; }, false); }
void pow_kernel(KernelCall& c) { binary_same(c, [](auto a, auto b) { return std::pow(a, b); }, false); }
void atan2_kernel(KernelCall& c) {
  binary_same(c, [](auto a, auto b) { return std::atan2(a, b); }, false);
}

// maximum/minimum propagate NaN, like PyTorch.
void maximum_kernel(KernelCall& c) {
  binary_same(c, [](auto a, auto b) { return (a != a || a > b) ? a : (b != b ? b : (a == b ? a : b)); }, true);
}
void minimum_kernel(KernelCall& c) {
  binary_same(c, [](auto a, auto b) { return (a != a || a < b) ? a : (b != b ? b : (a == b ? a : b)); }, true);
}

template <class F>
void compare(KernelCall& c, F f) {
  visit_compute_dtype(c.inputs[0].dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    binary_loop<bool, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], [&](T a, T b) { return f(a, b); });
  });
}
void eq_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a == b; }); }
void ne_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a != b; }); }
void lt_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a < b; }); }
void le_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a <= b; }); }
void gt_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a > b; }); }
void ge_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a >= b; }); }
void logical_and_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a != decltype(a)(0) && b != decltype(b)(0); }); }
void logical_or_kernel(KernelCall& c) { compare(c, [](auto a, auto b) { return a != decltype(a)(0) || b != decltype(b)(0); }); }

void logical_not_kernel(KernelCall& c) {
  visit_compute_dtype(c.inputs[0].dtype(), "logical_not", [&](auto tag) {
    using T = decltype(tag);
    unary_loop<bool, T>(c.outputs[0], c.inputs[0], [](T x) { return x == T(0); });
  });
}

void where_kernel(KernelCall& c) {
  visit_compute_dtype(c.inputs[1].dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    ternary_loop<T, bool, T, T>(c.outputs[0], c.inputs[0], c.inputs[1], c.inputs[2],
                                [](bool cond, T a, T b) { return cond ? a : b; });
  });
}

void clone_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  if (dense_same_shape(out, x) && out.dtype() == x.dtype()) {
    char* o = static_cast<char*>(out.raw_data());
    const char* in = static_cast<const char*>(x.raw_data());
    size_t isz = x.element_size();
    parallel_for(0, x.numel(), kParallelGrain * 2, [&](int64_t b, int64_t e) {
      std::memcpy(o + b * isz, in + b * isz, static_cast<size_t>(e - b) * isz);
    });
    return;
  }
  cast_kernel(c);  // strided or broadcast copy (and dtype conversion for copy_)
}

void slice_scatter_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  const auto& a = static_cast<const ops::SliceAttrs&>(c.attrs);
  int64_t d = wrap_dim(a.dim, out.dim(), "slice_scatter");
  ops::check_slice_fits(a, out.sizes()[d], "slice_scatter");
  KernelCall copy_base{c.op, c.inputs.subspan(0, 1), c.attrs, c.outputs, c.output_types};
  clone_kernel(copy_base);
  Shape strides(out.strides());
  strides[d] *= a.step;
  Tensor window = out.alias(c.inputs[1].sizes(), strides, a.start * out.strides()[d]);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    unary_loop<T, T>(window, c.inputs[1], [](T x) { return x; });
  });
}

}  // namespace

void register_elementwise_kernels() {
  auto set = [](OpDef& op, KernelFn k) { op.kernels[static_cast<size_t>(DeviceType::CPU)] = k; };
  set(ops::neg, neg_kernel);
  set(ops::abs, abs_kernel);
  set(ops::exp, exp_kernel);
  set(ops::log, log_kernel);
  set(ops::log1p, log1p_kernel);
  set(ops::sqrt, sqrt_kernel);
  set(ops::rsqrt, rsqrt_kernel);
  set(ops::sin, sin_kernel);
  set(ops::cos, cos_kernel);
  set(ops::tanh, tanh_kernel);
  set(ops::sigmoid, sigmoid_kernel);
  set(ops::relu, relu_kernel);
  set(ops::silu, silu_kernel);
  set(ops::erf, erf_kernel);
  set(ops::erfinv, erfinv_kernel);
  set(ops::square, square_kernel);
  set(ops::reciprocal, reciprocal_kernel);
  set(ops::sign, sign_kernel);
  set(ops::floor, floor_kernel);
  set(ops::ceil, ceil_kernel);
  set(ops::round, round_kernel);
  set(ops::gelu, gelu_kernel);
  set(ops::leaky_relu, leaky_relu_kernel);
  set(ops::elu, elu_kernel);
  set(ops::clamp, clamp_kernel);
  set(ops::pow_scalar, pow_scalar_kernel);
  set(ops::cast, cast_kernel);
  set(ops::add, add_kernel);
  set(ops::sub, sub_kernel);
  set(ops::mul, mul_kernel);
  set(ops::div, div_kernel);
  set(ops::pow, pow_kernel);
  set(ops::atan2, atan2_kernel);
  set(ops::maximum, maximum_kernel);
  set(ops::minimum, minimum_kernel);
  set(ops::eq, eq_kernel);
  set(ops::ne, ne_kernel);
  set(ops::lt, lt_kernel);
  set(ops::le, le_kernel);
  set(ops::gt, gt_kernel);
  set(ops::ge, ge_kernel);
  set(ops::logical_and, logical_and_kernel);
  set(ops::logical_or, logical_or_kernel);
  set(ops::logical_not, logical_not_kernel);
  set(ops::where, where_kernel);
}

void register_copy_kernels() {
  ops::clone.kernels[static_cast<size_t>(DeviceType::CPU)] = clone_kernel;
  ops::slice_scatter.kernels[static_cast<size_t>(DeviceType::CPU)] = slice_scatter_kernel;
}

}  // namespace kiln::cpu::kernels
