// Scalar bodies as CUDA C (see cuda_c_builder.h): which C expression computes a ScalarOp on
// which dtype. Constants are written exactly (hexadecimal floats); the non-finite ones
// through the bit-cast intrinsics, since NVRTC compiles without math.h's macros.
#include "cuda_c_builder.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "kiln/error.h"

namespace kiln::cuda {

namespace {

int64_t saturate_to_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

std::string int_literal(int64_t v) {
  // The most negative int64 has no literal of its own (its negation does not fit).
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

std::string float_literal(double value, bool single) {
  if (single) {
    const float f = static_cast<float>(value);
    if (std::isfinite(f)) {
      char text[64];
      std::snprintf(text, sizeof(text), "%af", static_cast<double>(f));
      return text;
    }
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    return "__int_as_float(" + std::to_string(static_cast<int32_t>(bits)) + ")";
  }
  if (std::isfinite(value)) {
    char text[64];
    std::snprintf(text, sizeof(text), "%a", value);
    return text;
  }
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return "__longlong_as_double(" + int_literal(static_cast<int64_t>(bits)) + ")";
}

const char* comparison(ScalarOp op) {
  switch (op) {
    case ScalarOp::Eq:
      return "==";
    case ScalarOp::Ne:
      return "!=";
    case ScalarOp::Lt:
      return "<";
    case ScalarOp::Le:
      return "<=";
    case ScalarOp::Gt:
      return ">";
    case ScalarOp::Ge:
      return ">=";
    default:
      return nullptr;
  }
}

// The math function computing `op` on float (with the f suffix) or double.
const char* math_function(ScalarOp op, bool single) {
  switch (op) {
    case ScalarOp::Abs:
      return single ? "fabsf" : "fabs";
    case ScalarOp::Exp:
      return single ? "expf" : "exp";
    case ScalarOp::Log:
      return single ? "logf" : "log";
    case ScalarOp::Log1p:
      return single ? "log1pf" : "log1p";
    case ScalarOp::Sqrt:
      return single ? "sqrtf" : "sqrt";
    case ScalarOp::Rsqrt:
      return single ? "rsqrtf" : "rsqrt";
    case ScalarOp::Sin:
      return single ? "sinf" : "sin";
    case ScalarOp::Cos:
      return single ? "cosf" : "cos";
    case ScalarOp::Tanh:
      return single ? "tanhf" : "tanh";
    case ScalarOp::Erf:
      return single ? "erff" : "erf";
    case ScalarOp::Floor:
      return single ? "floorf" : "floor";
    case ScalarOp::Ceil:
      return single ? "ceilf" : "ceil";
    case ScalarOp::RoundEven:  // rint rounds half to even in the default rounding mode
      return single ? "rintf" : "rint";
    default:
      return nullptr;
  }
}

}  // namespace

const char* CudaCBuilder::compute_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}

ScalarValue CudaCBuilder::parameter(const std::string& name, DType dtype) {
  values_.emplace_back(name, dtype);
  return ScalarValue{static_cast<int32_t>(values_.size() - 1)};
}

ScalarValue CudaCBuilder::define(DType dtype, const std::string& expression) {
  const std::string var = "v" + std::to_string(values_.size());
  statements_ += "  const " + std::string(compute_type(dtype)) + " " + var + " = " + expression + ";\n";
  return parameter(var, dtype);
}

const std::pair<std::string, DType>& CudaCBuilder::entry(ScalarValue v) const {
  KILN_CHECK(v.id >= 0 && static_cast<size_t>(v.id) < values_.size(),
             "[cuda] expected a ScalarValue made by this builder, found id ", v.id,
             ". Fix: the op's scalar_body must only pass values it got from the builder or its "
             "operands.");
  return values_[static_cast<size_t>(v.id)];
}

void CudaCBuilder::unsupported(ScalarOp op, DType dtype) const {
  KILN_FAIL("[cuda] expected ", scalar_op_name(op),
            " on a dtype it supports (see kiln/scalar_body.h), found ", dtype,
            ". Fix: cast the operand in the op's scalar_body.");
}

ScalarValue CudaCBuilder::constant(double value, DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return define(dtype, value != 0 ? "true" : "false");
    case DType::Int32:  // wraps, as the MLIR builder's i32 constants do
      return define(dtype, "(int)" + int_literal(static_cast<int32_t>(saturate_to_int64(value))));
    case DType::Int64:
      return define(dtype, int_literal(saturate_to_int64(value)));
    case DType::Float64:
      return define(dtype, float_literal(value, false));
    default:  // float32, and the float that float16/bfloat16 values are computed in
      return define(dtype, float_literal(value, true));
  }
}

ScalarValue CudaCBuilder::unary(ScalarOp op, ScalarValue a) {
  const DType t = dtype(a);
  const std::string& x = name(a);
  if (is_floating(t)) {
    if (op == ScalarOp::Neg) return define(t, "-" + x);
    if (const char* fn = math_function(op, t != DType::Float64))
      return define(t, std::string(fn) + "(" + x + ")");
  } else if (t == DType::Bool) {
    if (op == ScalarOp::Not) return define(t, "!" + x);
  } else {
    // Integers wrap on overflow (-INT_MIN is INT_MIN): negate as unsigned.
    const std::string u = t == DType::Int64 ? "unsigned long long" : "unsigned";
    const std::string c = compute_type(t);
    switch (op) {
      case ScalarOp::Neg:
        return define(t, "(" + c + ")(0u - (" + u + ")" + x + ")");
      case ScalarOp::Abs:
        return define(t, x + " < 0 ? (" + c + ")(0u - (" + u + ")" + x + ") : " + x);
      case ScalarOp::Floor:
      case ScalarOp::Ceil:
      case ScalarOp::RoundEven:  // integers are already whole
        return a;
      default:
        break;
    }
  }
  unsupported(op, t);
}

ScalarValue CudaCBuilder::binary(ScalarOp op, ScalarValue a, ScalarValue b) {
  const DType t = dtype(a);
  KILN_CHECK(t == dtype(b), "[cuda] expected the operands of ", scalar_op_name(op),
             " to share a dtype, found ", t, " and ", dtype(b),
             ". Fix: cast one operand in the op's scalar_body.");
  const std::string &x = name(a), &y = name(b);
  if (const char* cmp = comparison(op)) {
    // C's comparisons are false on NaN except !=, as ScalarOp's; bools compare as 0 and 1.
    return define(DType::Bool, x + " " + cmp + " " + y);
  }
  if (is_floating(t)) {
    const bool single = t != DType::Float64;
    switch (op) {
      case ScalarOp::Add:
        return define(t, x + " + " + y);
      case ScalarOp::Sub:
        return define(t, x + " - " + y);
      case ScalarOp::Mul:
        return define(t, x + " * " + y);
      case ScalarOp::Div:
        return define(t, x + " / " + y);
      case ScalarOp::Max:  // NaN-propagating, unlike fmax
      case ScalarOp::Min: {
        const std::string fn = std::string(op == ScalarOp::Max ? "fmax" : "fmin") + (single ? "f" : "");
        return define(t, x + " != " + x + " || " + y + " != " + y + " ? " + x + " + " + y + " : " +
                             fn + "(" + x + ", " + y + ")");
      }
      case ScalarOp::Pow:
        return define(t, std::string(single ? "powf" : "pow") + "(" + x + ", " + y + ")");
      case ScalarOp::Atan2:
        return define(t, std::string(single ? "atan2f" : "atan2") + "(" + x + ", " + y + ")");
      default:
        break;
    }
  } else if (t == DType::Bool) {  // add/max are "or", mul/min are "and", as the eager kernels
    switch (op) {
      case ScalarOp::Or:
      case ScalarOp::Add:
      case ScalarOp::Max:
        return define(t, x + " || " + y);
      case ScalarOp::And:
      case ScalarOp::Mul:
      case ScalarOp::Min:
        return define(t, x + " && " + y);
      default:
        break;
    }
  } else {
    // Integers wrap around: the arithmetic runs on the unsigned type of the same width.
    const std::string u = t == DType::Int64 ? "unsigned long long" : "unsigned";
    const std::string c = compute_type(t);
    auto wrapping = [&](const char* sign) {
      return "(" + c + ")((" + u + ")" + x + " " + sign + " (" + u + ")" + y + ")";
    };
    switch (op) {
      case ScalarOp::Add:
        return define(t, wrapping("+"));
      case ScalarOp::Sub:
        return define(t, wrapping("-"));
      case ScalarOp::Mul:
        return define(t, wrapping("*"));
      case ScalarOp::Div:  // truncates toward zero
        return define(t, x + " / " + y);
      case ScalarOp::Max:
        return define(t, x + " > " + y + " ? " + x + " : " + y);
      case ScalarOp::Min:
        return define(t, x + " < " + y + " ? " + x + " : " + y);
      default:
        break;
    }
  }
  unsupported(op, t);
}

ScalarValue CudaCBuilder::select(ScalarValue cond, ScalarValue a, ScalarValue b) {
  KILN_CHECK(dtype(cond) == DType::Bool, "[cuda] expected a bool select condition, found ",
             dtype(cond), ". Fix: compare first (b.binary(ScalarOp::Ne, x, b.like(x, 0))).");
  KILN_CHECK(dtype(a) == dtype(b), "[cuda] expected both select branches of one dtype, found ",
             dtype(a), " and ", dtype(b), ". Fix: cast one branch in the op's scalar_body.");
  return define(dtype(a), name(cond) + " ? " + name(a) + " : " + name(b));
}

ScalarValue CudaCBuilder::cast(ScalarValue a, DType to) {
  const DType from = dtype(a);
  if (from == to) return a;
  if (to == DType::Bool) return define(to, name(a) + " != 0");  // NaN is true, as in C++
  // float -> int truncates toward zero; float16/bfloat16 round when the kernel stores them.
  return define(to, "(" + std::string(compute_type(to)) + ")" + name(a));
}

}  // namespace kiln::cuda
