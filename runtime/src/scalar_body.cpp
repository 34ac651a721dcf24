// Names of the scalar-body primitives, for dumps and error messages.
#include "kiln/scalar_body.h"

namespace kiln {

const char* scalar_op_name(ScalarOp op) {
  switch (op) {
    case ScalarOp::Add:
      return "add";
    case ScalarOp::Sub:
      return "sub";
    case ScalarOp::Mul:
      return "mul";
    case ScalarOp::Div:
      return "div";
    case ScalarOp::Max:
      return "max";
    case ScalarOp::Min:
      return "min";
    case ScalarOp::Pow:
      return "pow";
    case ScalarOp::And:
      return "and";
    case ScalarOp::Or:
      return "or";
    case ScalarOp::Eq:
      return "eq";
    case ScalarOp::Ne:
      return "ne";
    case ScalarOp::Lt:
      return "lt";
    case ScalarOp::Le:
      return "le";
    case ScalarOp::Gt:
      return "gt";
    case ScalarOp::Ge:
      return "ge";
    case ScalarOp::Neg:
      return "neg";
    case ScalarOp::Abs:
      return "abs";
    case ScalarOp::Not:
      return "not";
    case ScalarOp::Exp:
      return "exp";
    case ScalarOp::Log:
      return "log";
    case ScalarOp::Log1p:
      return "log1p";
    case ScalarOp::Sqrt:
      return "sqrt";
    case ScalarOp::Rsqrt:
      return "rsqrt";
    case ScalarOp::Sin:
      return "sin";
    case ScalarOp::Cos:
      return "cos";
    case ScalarOp::Tanh:
      return "tanh";
    case ScalarOp::Erf:
      return "erf";
    case ScalarOp::Floor:
      return "floor";
    case ScalarOp::Ceil:
      return "ceil";
    case ScalarOp::RoundEven:
      return "round_even";
    case ScalarOp::Atan2:
      return "atan2";
  }
  return "?";
}

}  // namespace kiln
