// Scalar bodies to MLIR (see scalar_builder.h): which arith or math op computes a ScalarOp on
// which dtype, to what accuracy, for the CPU's math or libdevice's. A file of its own because it
// is about numerics, while the generators' loops around it are about memory; it is also the
// only file of the code generators that builds math ops.
#include "kiln/codegen_common/scalar_builder.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/codegen_common/spec_check.h"
#include "kiln/error.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"

namespace kiln::codegen_common {
namespace {

using Predicate = std::pair<mlir::arith::CmpFPredicate, mlir::arith::CmpIPredicate>;

int64_t saturate_to_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Ordered float predicates (false on NaN) except Ne; signed integer ones; unsigned on
// Bool, where true (1) > false (0).
std::optional<Predicate> comparison(ScalarOp op, DType t) {
  using F = mlir::arith::CmpFPredicate;
  using I = mlir::arith::CmpIPredicate;
  bool u = t == DType::Bool;
  switch (op) {
    case ScalarOp::Eq:
      return Predicate{F::OEQ, I::eq};
    case ScalarOp::Ne:
      return Predicate{F::UNE, I::ne};
    case ScalarOp::Lt:
      return Predicate{F::OLT, u ? I::ult : I::slt};
    case ScalarOp::Le:
      return Predicate{F::OLE, u ? I::ule : I::sle};
    case ScalarOp::Gt:
      return Predicate{F::OGT, u ? I::ugt : I::sgt};
    case ScalarOp::Ge:
      return Predicate{F::OGE, u ? I::uge : I::sge};
    default:
      return std::nullopt;
  }
}

}  // namespace

void register_scalar_body_dialects(mlir::DialectRegistry& registry) {
  registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::math::MathDialect,
                  mlir::LLVM::LLVMDialect>();
}

void MlirScalarBuilder::set_context(const std::string& kernel, const ir::Node* node) {
  where_ = "[" + generator_ + "] kernel '" + kernel + "'" + (node ? ", op " + node_str(*node) : "");
  loc_ = mlir::NameLoc::get(b_.getStringAttr(kernel + (node ? "/" + node->op->name : "")));
}

ScalarValue MlirScalarBuilder::constant(double value, DType t) {
  check_dtype(t, "a constant");
  mlir::Type type = element_type(t);
  mlir::TypedAttr attr;
  if (t == DType::Float32)
    attr = b_.getF32FloatAttr(static_cast<float>(value));
  else if (t == DType::Float64)
    attr = b_.getF64FloatAttr(value);
  else if (t == DType::Bool)
    attr = b_.getIntegerAttr(type, value != 0 ? 1 : 0);
  else
    attr = b_.getIntegerAttr(type, saturate_to_int64(value));  // wraps to i32 if needed
  return wrap(splat_constant(attr), t);
}

ScalarValue MlirScalarBuilder::unary(ScalarOp op, ScalarValue a) {
  DType t = dtype(a);
  mlir::Value x = value(a);
  if (is_floating(t)) {
    if (mlir::Value r = floating_unary(op, x, t)) return wrap(r, t);
  } else if (t == DType::Bool) {
    if (op == ScalarOp::Not)
      return wrap(b_.create<mlir::arith::XOrIOp>(loc_, x, bool_const(true)), t);
  } else {
    mlir::Value zero = zero_of(x.getType());
    switch (op) {
      case ScalarOp::Neg:  // wraps, as the eager kernel does
        return wrap(b_.create<mlir::arith::SubIOp>(loc_, zero, x), t);
      case ScalarOp::Abs: {
        mlir::Value negative =
            b_.create<mlir::arith::CmpIOp>(loc_, mlir::arith::CmpIPredicate::slt, x, zero);
        mlir::Value negated = b_.create<mlir::arith::SubIOp>(loc_, zero, x);
        return wrap(b_.create<mlir::arith::SelectOp>(loc_, negative, negated, x), t);
      }
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

ScalarValue MlirScalarBuilder::binary(ScalarOp op, ScalarValue a, ScalarValue b) {
  DType t = dtype(a);
  KILN_CHECK(t == dtype(b), where_, ": expected the operands of ", scalar_op_name(op),
             " to share a dtype, found ", t, " and ", dtype(b),
             ". Fix: cast one operand in the op's scalar_body.");
  mlir::Value x = value(a), y = value(b);
  if (auto pred = comparison(op, t)) {
    mlir::Value r =
        is_floating(t) ? b_.create<mlir::arith::CmpFOp>(loc_, std::get<0>(*pred), x, y).getResult()
                       : b_.create<mlir::arith::CmpIOp>(loc_, std::get<1>(*pred), x, y).getResult();
    return wrap(r, DType::Bool);
  }
  if (mlir::Value r = arithmetic(op, t, x, y)) return wrap(r, t);
  unsupported(op, t);
}

ScalarValue MlirScalarBuilder::select(ScalarValue cond, ScalarValue a, ScalarValue b) {
  KILN_CHECK(dtype(cond) == DType::Bool, where_, ": expected a bool select condition, found ",
             dtype(cond), ". Fix: compare first (b.binary(ScalarOp::Ne, x, b.like(x, 0))).");
  KILN_CHECK(dtype(a) == dtype(b), where_, ": expected both select branches of one dtype, found ",
             dtype(a), " and ", dtype(b), ". Fix: cast one branch in the op's scalar_body.");
  return wrap(b_.create<mlir::arith::SelectOp>(loc_, value(cond), value(a), value(b)), dtype(a));
}

ScalarValue MlirScalarBuilder::cast(ScalarValue a, DType to) {
  check_dtype(to, "a cast");
  DType from = dtype(a);
  mlir::Value x = value(a);
  if (from == to) return a;
  mlir::Type type = register_type(to);
  mlir::Value r;
  if (to == DType::Bool) {  // != 0; NaN is true, as in C++
    r = is_floating(from) ? b_.create<mlir::arith::CmpFOp>(loc_, mlir::arith::CmpFPredicate::UNE, x,
                                                           zero_of(x.getType()))
                                .getResult()
                          : b_.create<mlir::arith::CmpIOp>(loc_, mlir::arith::CmpIPredicate::ne, x,
                                                           zero_of(x.getType()))
                                .getResult();
  } else if (from == DType::Bool) {
    r = is_floating(to) ? b_.create<mlir::arith::UIToFPOp>(loc_, type, x).getResult()
                        : b_.create<mlir::arith::ExtUIOp>(loc_, type, x).getResult();
  } else if (is_floating(from) && is_floating(to)) {
    r = itemsize(to) > itemsize(from) ? b_.create<mlir::arith::ExtFOp>(loc_, type, x).getResult()
                                      : b_.create<mlir::arith::TruncFOp>(loc_, type, x).getResult();
  } else if (is_floating(from)) {  // truncates toward zero
    r = b_.create<mlir::arith::FPToSIOp>(loc_, type, x);
  } else if (is_floating(to)) {
    r = b_.create<mlir::arith::SIToFPOp>(loc_, type, x);
  } else {
    r = itemsize(to) > itemsize(from) ? b_.create<mlir::arith::ExtSIOp>(loc_, type, x).getResult()
                                      : b_.create<mlir::arith::TruncIOp>(loc_, type, x).getResult();
  }
  return wrap(r, to);
}

mlir::Type MlirScalarBuilder::element_type(DType t) {
  switch (t) {
    case DType::Float32:
      return b_.getF32Type();
    case DType::Float64:
      return b_.getF64Type();
    case DType::Int32:
      return b_.getI32Type();
    case DType::Int64:
      return b_.getI64Type();
    case DType::Bool:
      return b_.getI1Type();
    default:
      break;
  }
  check_dtype(t, "a value");
  return {};
}

void MlirScalarBuilder::check_dtype(DType t, const char* what) const {
  KILN_CHECK(supported_dtype(t), where_, ": expected ", what,
             " of dtype float32, float64, int32, int64 or bool, found ", t,
             ". Fix: leave this op out of the fusion group (or cast to float32 before it).");
}

ScalarValue MlirScalarBuilder::apply(
    const std::string& kernel, const ir::Node& node,
    const std::unordered_map<const ir::Value*, ScalarValue>& values) {
  set_context(kernel, &node);
  std::vector<ScalarValue> operands;
  for (const ir::Value* in : node.inputs) {
    if (!in) {
      operands.push_back(ScalarValue{});
      continue;
    }
    auto it = values.find(in);
    KILN_CHECK(it != values.end(), where_, ": expected value %", in->id,
               " to be defined earlier in the region, found no definition. Fix: the region "
               "must be in definition order (ir::verify checks it).");
    operands.push_back(it->second);
  }
  ScalarValue r = node.op->scalar_body(*this, *node.attrs, operands);
  DType want = node.outputs[0]->type.dtype;
  KILN_CHECK(dtype(r) == want, where_, ": expected the scalar body to return the op's output dtype ",
             want, ", found ", dtype(r), ". Fix: cast the result in the op's scalar_body.");
  set_context(kernel, nullptr);
  return r;
}

const std::pair<mlir::Value, DType>& MlirScalarBuilder::entry(ScalarValue v) const {
  KILN_CHECK(v.id >= 0 && static_cast<size_t>(v.id) < values_.size(), where_,
             ": expected a ScalarValue made by this builder, found id ", v.id,
             ". Fix: the op's scalar_body must only pass values it got from the builder or "
             "its operands.");
  return values_[static_cast<size_t>(v.id)];
}

void MlirScalarBuilder::unsupported(ScalarOp op, DType t) const {
  KILN_FAIL(where_, ": expected ", scalar_op_name(op),
            " on a dtype it supports (see kiln/scalar_body.h), found ", t,
            ". Fix: cast the operand in the op's scalar_body, or leave the op out of the "
            "fusion group for this dtype.");
}

// The scalar `attr` as a constant of the current lane count (a splat for vectors).
mlir::Value MlirScalarBuilder::splat_constant(mlir::TypedAttr attr) {
  if (lanes_ > 1)
    attr = mlir::DenseElementsAttr::get(mlir::VectorType::get({lanes_}, attr.getType()),
                                        llvm::ArrayRef<mlir::Attribute>{attr});
  return b_.create<mlir::arith::ConstantOp>(loc_, attr);
}
mlir::Value MlirScalarBuilder::bool_const(bool v) {
  return splat_constant(b_.getIntegerAttr(b_.getI1Type(), v ? 1 : 0));
}
mlir::Value MlirScalarBuilder::zero_of(mlir::Type type) {
  mlir::Type element = mlir::getElementTypeOrSelf(type);
  if (mlir::isa<mlir::FloatType>(element)) return splat_constant(b_.getFloatAttr(element, 0.0));
  return splat_constant(b_.getIntegerAttr(element, 0));
}

// On the CPU, float32 exp, log, log1p, tanh and erf stay math ops: the polynomial
// approximation patterns turn them into arith code that LLVM vectorizes (within 4.3 ulp of the
// exact result, as accurate as the eager Eigen kernels). Float64 ones without an LLVM
// intrinsic (the patterns leave float64 alone) call libm. With libdevice every function is a
// math op (libdevice has both precisions, within 2 ulp of the exact result).
mlir::Value MlirScalarBuilder::floating_unary(ScalarOp op, mlir::Value x, DType t) {
  const bool libm = t == DType::Float64 && math_ == MathLibrary::Cpu;
  const bool intrinsics = math_ == MathLibrary::Cpu;
  switch (op) {
    case ScalarOp::Neg:
      return b_.create<mlir::arith::NegFOp>(loc_, x);
    case ScalarOp::Abs:
      return b_.create<mlir::math::AbsFOp>(loc_, x);
    case ScalarOp::Exp:
      return b_.create<mlir::math::ExpOp>(loc_, x);
    case ScalarOp::Log:
      return b_.create<mlir::math::LogOp>(loc_, x);
    case ScalarOp::Log1p:
      return libm ? libm_call("log1p", x) : b_.create<mlir::math::Log1pOp>(loc_, x).getResult();
    case ScalarOp::Sqrt:
      return b_.create<mlir::math::SqrtOp>(loc_, x);
    case ScalarOp::Rsqrt:
      return b_.create<mlir::math::RsqrtOp>(loc_, x);
    // MLIR's sin/cos approximations lose up to 4e-3 relative accuracy near the zeros
    // (measured in kernels_test.cpp): the LLVM intrinsics (libm's sinf/cosf) instead.
    case ScalarOp::Sin:
      return intrinsics ? b_.create<mlir::LLVM::SinOp>(loc_, x).getResult()
                        : b_.create<mlir::math::SinOp>(loc_, x).getResult();
    case ScalarOp::Cos:
      return intrinsics ? b_.create<mlir::LLVM::CosOp>(loc_, x).getResult()
                        : b_.create<mlir::math::CosOp>(loc_, x).getResult();
    case ScalarOp::Tanh:
      return libm ? libm_call("tanh", x) : b_.create<mlir::math::TanhOp>(loc_, x).getResult();
    case ScalarOp::Erf:
      return libm ? libm_call("erf", x) : b_.create<mlir::math::ErfOp>(loc_, x).getResult();
    case ScalarOp::Floor:
      return b_.create<mlir::math::FloorOp>(loc_, x);
    case ScalarOp::Ceil:
      return b_.create<mlir::math::CeilOp>(loc_, x);
    case ScalarOp::RoundEven:
      return b_.create<mlir::math::RoundEvenOp>(loc_, x);
    default:
      return {};
  }
}

// A call to the C library's `name` (one argument per operand, in the operands' precision:
// "atan2f" for float32), declared once per module; on vectors one call per lane (there is no
// vector libm to call).
mlir::Value MlirScalarBuilder::libm_call(const std::string& name, mlir::ValueRange args) {
  mlir::Type element = mlir::getElementTypeOrSelf(args[0].getType());
  auto fn = module_.lookupSymbol<mlir::func::FuncOp>(name);
  if (!fn) {
    mlir::OpBuilder decl = mlir::OpBuilder::atBlockBegin(module_.getBody());
    llvm::SmallVector<mlir::Type, 2> params(args.size(), element);
    fn = decl.create<mlir::func::FuncOp>(loc_, name, decl.getFunctionType(params, {element}));
    fn.setPrivate();
  }
  auto vector = mlir::dyn_cast<mlir::VectorType>(args[0].getType());
  if (!vector) return b_.create<mlir::func::CallOp>(loc_, fn, args).getResult(0);
  mlir::Value out = b_.create<mlir::LLVM::PoisonOp>(loc_, vector);
  for (int64_t i = 0; i < vector.getNumElements(); ++i) {
    mlir::Value lane = b_.create<mlir::arith::ConstantOp>(loc_, b_.getI64IntegerAttr(i));
    llvm::SmallVector<mlir::Value, 2> lanes;
    for (mlir::Value arg : args) lanes.push_back(b_.create<mlir::LLVM::ExtractElementOp>(loc_, arg, lane));
    mlir::Value r = b_.create<mlir::func::CallOp>(loc_, fn, lanes).getResult(0);
    out = b_.create<mlir::LLVM::InsertElementOp>(loc_, out, r, lane);
  }
  return out;
}

mlir::Value MlirScalarBuilder::arithmetic(ScalarOp op, DType t, mlir::Value x, mlir::Value y) {
  namespace arith = mlir::arith;
  if (is_floating(t)) {
    switch (op) {
      case ScalarOp::Add:
        return b_.create<arith::AddFOp>(loc_, x, y);
      case ScalarOp::Sub:
        return b_.create<arith::SubFOp>(loc_, x, y);
      case ScalarOp::Mul:
        return b_.create<arith::MulFOp>(loc_, x, y);
      case ScalarOp::Div:
        return b_.create<arith::DivFOp>(loc_, x, y);
      case ScalarOp::Max:  // NaN-propagating
        return b_.create<arith::MaximumFOp>(loc_, x, y);
      case ScalarOp::Min:
        return b_.create<arith::MinimumFOp>(loc_, x, y);
      case ScalarOp::Pow:
        return b_.create<mlir::math::PowFOp>(loc_, x, y);
      // On the CPU libm's, one call per lane: MLIR 19's float32 approximation gets signed zeros
      // and infinities wrong (tests/frontend/special_functions_test.cpp), and float64 has
      // neither an approximation nor an LLVM intrinsic. libdevice's elsewhere.
      case ScalarOp::Atan2:
        if (math_ == MathLibrary::Cpu) {
          llvm::SmallVector<mlir::Value, 2> xy = {x, y};
          return libm_call(t == DType::Float64 ? "atan2" : "atan2f", xy);
        }
        return b_.create<mlir::math::Atan2Op>(loc_, x, y);
      default:
        return {};
    }
  }
  if (t == DType::Bool) {  // add/max are "or", mul/min are "and", as the eager kernels
    switch (op) {
      case ScalarOp::Or:
      case ScalarOp::Add:
      case ScalarOp::Max:
        return b_.create<arith::OrIOp>(loc_, x, y);
      case ScalarOp::And:
      case ScalarOp::Mul:
      case ScalarOp::Min:
        return b_.create<arith::AndIOp>(loc_, x, y);
      default:
        return {};
    }
  }
  switch (op) {  // integers wrap around (no nsw/nuw flags)
    case ScalarOp::Add:
      return b_.create<arith::AddIOp>(loc_, x, y);
    case ScalarOp::Sub:
      return b_.create<arith::SubIOp>(loc_, x, y);
    case ScalarOp::Mul:
      return b_.create<arith::MulIOp>(loc_, x, y);
    case ScalarOp::Div:  // truncates toward zero
      return b_.create<arith::DivSIOp>(loc_, x, y);
    case ScalarOp::Max:
      return b_.create<arith::MaxSIOp>(loc_, x, y);
    case ScalarOp::Min:
      return b_.create<arith::MinSIOp>(loc_, x, y);
    default:
      return {};
  }
}

}  // namespace kiln::codegen_common
