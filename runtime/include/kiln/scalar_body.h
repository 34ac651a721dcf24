// The scalar body of an elementwise op: what it computes for one element, written once
// against a small builder interface. Code generators implement the builder (the CPU backend
// emits MLIR arith/math ops); a plain evaluator implements it for tests. So the fused
// kernels of every backend compute what the op's definition says, and no backend keeps its
// own list of elementwise ops (OpDef::scalar_body is the one place).
#pragma once

#include <cstdint>
#include <span>

#include "kiln/attrs.h"
#include "kiln/dtype.h"

namespace kiln {

// A value inside a ScalarBuilder (an index into the builder's own table).
struct ScalarValue {
  int32_t id = -1;
};

// The primitive operations every backend provides. Binary operations take operands of one
// dtype; comparisons return Bool. Integer and Bool values support the ops noted below.
enum class ScalarOp : uint8_t {
  // binary
  Add,
  Sub,
  Mul,
  Div,  // Div on integers truncates toward zero
  Max,
  Min,  // NaN-propagating on floats (as std::max would not be)
  Pow,  // floating only
  And,
  Or,  // Bool only
  // comparisons (-> Bool); false when either operand is NaN, except Ne
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  // unary
  Neg,
  Abs,
  Not,  // Not: Bool only
  Exp,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Erf,  // floating only
  Floor,
  Ceil,
  RoundEven,  // floating only (RoundEven: half to even, as std::nearbyint)
  // binary, floating only (after the unary ones so that the older numbering stays)
  Atan2,  // atan2(a, b): the angle of the point (b, a), in [-pi, pi]
};
const char* scalar_op_name(ScalarOp op);

class ScalarBuilder {
 public:
  virtual ~ScalarBuilder() = default;
  virtual DType dtype(ScalarValue v) const = 0;
  // A constant of `dtype` (rounded to it: 0.1 as float32 is 0.1f).
  virtual ScalarValue constant(double value, DType dtype) = 0;
  virtual ScalarValue unary(ScalarOp op, ScalarValue a) = 0;
  virtual ScalarValue binary(ScalarOp op, ScalarValue a, ScalarValue b) = 0;
  // cond ? a : b; cond is Bool, a and b share a dtype.
  virtual ScalarValue select(ScalarValue cond, ScalarValue a, ScalarValue b) = 0;
  // Converts as the eager cast kernel does (float -> int truncates; -> Bool is != 0).
  virtual ScalarValue cast(ScalarValue a, DType to) = 0;

  // Conveniences over the primitives.
  ScalarValue add(ScalarValue a, ScalarValue b) { return binary(ScalarOp::Add, a, b); }
  ScalarValue sub(ScalarValue a, ScalarValue b) { return binary(ScalarOp::Sub, a, b); }
  ScalarValue mul(ScalarValue a, ScalarValue b) { return binary(ScalarOp::Mul, a, b); }
  ScalarValue div(ScalarValue a, ScalarValue b) { return binary(ScalarOp::Div, a, b); }
  // A constant with a's dtype.
  ScalarValue like(ScalarValue a, double value) { return constant(value, dtype(a)); }
};

// Builds the op's result for one element from its operands' values (one per op input, in
// order, already of the input dtypes; broadcasting is the caller's business). Returns a value
// of the op's output dtype.
using ScalarBodyFn = ScalarValue (*)(ScalarBuilder& b, const Attrs& attrs,
                                     std::span<const ScalarValue> operands);

}  // namespace kiln
