// Fused elementwise kernels through MLIR: each FusedKernelSpec becomes one func.func of
// the KernelFn signature (scf loops, llvm-dialect loads and stores, the ops' scalar bodies as
// arith/math; for large outputs also a loop of explicit vectors with streaming stores), all in
// one module that is lowered to the LLVM dialect, compiled once to a relocatable object (or
// found in the kernel cache, kernel_cache.h) and linked by an LLJIT.
//
// This is the one translation unit with MLIR includes on the kernel path (each such file
// costs ~45 s to compile here): the plain interface is kiln/codegen/kernels.h.
#include "kiln/codegen/kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/codegen/kernel_cache.h"
#include "kiln/error.h"
#include "kiln/ops/reduction.h"

// Per-conversion headers only: mlir/Conversion/Passes.h and InitAll*.h would triple the
// compile time of this file (see /work/shared/notes/mlir19.md).
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

// kiln's version, for the cache key (the build may pass it; see compiler_description).
#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unversioned"
#endif

namespace kiln::codegen {

bool supported_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64 ||
         t == DType::Bool;
}

namespace {

// Bump whenever a change here alters the machine code of the same MLIR (pattern sets, LLVM
// options, the JIT setup): cached modules of another revision are then recompiled.
// 2: streaming stores for large outputs.
constexpr int kCodegenRevision = 2;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

// Collects MLIR diagnostics as text. The handler runs inside MLIR, which is built without
// exceptions, so it only appends; compile_kernels throws at the kiln boundary.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* ctx)
      : handler_(ctx, [this](mlir::Diagnostic& diag) {
          llvm::raw_string_ostream os(text_);
          os << "  " << diag.getLocation() << ": " << diag << "\n";
          for (const mlir::Diagnostic& note : diag.getNotes())
            os << "    " << note.getLocation() << ": note: " << note << "\n";
          return mlir::success();
        }) {}
  DiagnosticCollector(const DiagnosticCollector&) = delete;
  DiagnosticCollector& operator=(const DiagnosticCollector&) = delete;
  std::string take() { return std::exchange(text_, std::string()); }

 private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

std::string llvm_error_text(llvm::Error error) {
  return llvm::toString(std::move(error));
}

// "add %7": how errors name a region node.
std::string node_str(const ir::Node& n) {
  std::string out = n.op ? n.op->name : "<no op>";
  for (size_t i = 0; i < n.outputs.size(); ++i)
    out += (i == 0 ? " %" : ", %") + std::to_string(n.outputs[i]->id);
  return out;
}

// The scalar bodies' values as MLIR SSA values inside the innermost loop: scalars, or in the
// streaming loop vectors of `lanes` elements (arith and math ops apply lane by lane, so one
// scalar_body serves both). Bool is i1 in registers (i8 in memory). Errors name the kernel and
// the op whose body is being built.
class MlirScalarBuilder final : public ScalarBuilder {
 public:
  MlirScalarBuilder(mlir::OpBuilder& b, mlir::ModuleOp module) : b_(b), module_(module) {}

  // 1: values are scalars; more: vectors of that many lanes.
  void set_lanes(int64_t lanes) { lanes_ = lanes; }
  // `element` as a value of the current lane count.
  mlir::Type shaped(mlir::Type element) const {
    return lanes_ == 1 ? element : mlir::VectorType::get({lanes_}, element);
  }

  // Where the next values come from, for error messages and MLIR locations.
  void set_context(const std::string& kernel, const ir::Node* node) {
    where_ = "[codegen] kernel '" + kernel + "'" + (node ? ", op " + node_str(*node) : "");
    loc_ = mlir::NameLoc::get(b_.getStringAttr(kernel + (node ? "/" + node->op->name : "")));
  }
  mlir::Location loc() const { return loc_; }

  ScalarValue wrap(mlir::Value v, DType t) {
    values_.emplace_back(v, t);
    return ScalarValue{static_cast<int32_t>(values_.size() - 1)};
  }
  mlir::Value value(ScalarValue v) const { return entry(v).first; }

  DType dtype(ScalarValue v) const override { return entry(v).second; }

  ScalarValue constant(double value, DType t) override {
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

  ScalarValue unary(ScalarOp op, ScalarValue a) override {
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

  ScalarValue binary(ScalarOp op, ScalarValue a, ScalarValue b) override {
    DType t = dtype(a);
    KILN_CHECK(t == dtype(b), where_, ": expected the operands of ", scalar_op_name(op),
               " to share a dtype, found ", t, " and ", dtype(b),
               ". Fix: cast one operand in the op's scalar_body.");
    mlir::Value x = value(a), y = value(b);
    if (auto pred = comparison(op, t)) {
      mlir::Value r =
          is_floating(t)
              ? b_.create<mlir::arith::CmpFOp>(loc_, std::get<0>(*pred), x, y).getResult()
              : b_.create<mlir::arith::CmpIOp>(loc_, std::get<1>(*pred), x, y).getResult();
      return wrap(r, DType::Bool);
    }
    if (mlir::Value r = arithmetic(op, t, x, y)) return wrap(r, t);
    unsupported(op, t);
  }

  ScalarValue select(ScalarValue cond, ScalarValue a, ScalarValue b) override {
    KILN_CHECK(dtype(cond) == DType::Bool, where_, ": expected a bool select condition, found ",
               dtype(cond), ". Fix: compare first (b.binary(ScalarOp::Ne, x, b.like(x, 0))).");
    KILN_CHECK(dtype(a) == dtype(b), where_, ": expected both select branches of one dtype, found ",
               dtype(a), " and ", dtype(b), ". Fix: cast one branch in the op's scalar_body.");
    return wrap(b_.create<mlir::arith::SelectOp>(loc_, value(cond), value(a), value(b)), dtype(a));
  }

  ScalarValue cast(ScalarValue a, DType to) override {
    check_dtype(to, "a cast");
    DType from = dtype(a);
    mlir::Value x = value(a);
    if (from == to) return a;
    mlir::Type type = register_type(to);
    mlir::Value r;
    if (to == DType::Bool) {  // != 0; NaN is true, as in C++
      r = is_floating(from) ? b_.create<mlir::arith::CmpFOp>(loc_, mlir::arith::CmpFPredicate::UNE,
                                                             x, zero_of(x.getType()))
                                  .getResult()
                            : b_.create<mlir::arith::CmpIOp>(loc_, mlir::arith::CmpIPredicate::ne,
                                                             x, zero_of(x.getType()))
                                  .getResult();
    } else if (from == DType::Bool) {
      r = is_floating(to) ? b_.create<mlir::arith::UIToFPOp>(loc_, type, x).getResult()
                          : b_.create<mlir::arith::ExtUIOp>(loc_, type, x).getResult();
    } else if (is_floating(from) && is_floating(to)) {
      r = itemsize(to) > itemsize(from)
              ? b_.create<mlir::arith::ExtFOp>(loc_, type, x).getResult()
              : b_.create<mlir::arith::TruncFOp>(loc_, type, x).getResult();
    } else if (is_floating(from)) {  // truncates toward zero
      r = b_.create<mlir::arith::FPToSIOp>(loc_, type, x);
    } else if (is_floating(to)) {
      r = b_.create<mlir::arith::SIToFPOp>(loc_, type, x);
    } else {
      r = itemsize(to) > itemsize(from)
              ? b_.create<mlir::arith::ExtSIOp>(loc_, type, x).getResult()
              : b_.create<mlir::arith::TruncIOp>(loc_, type, x).getResult();
    }
    return wrap(r, to);
  }

  mlir::Type register_type(DType t) { return shaped(element_type(t)); }

  mlir::Type element_type(DType t) {
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

  void check_dtype(DType t, const char* what) const {
    KILN_CHECK(supported_dtype(t), where_, ": expected ", what,
               " of dtype float32, float64, int32, int64 or bool, found ", t,
               ". Fix: leave this op out of the fusion group (or cast to float32 before it).");
  }

 private:
  using Predicate = std::pair<mlir::arith::CmpFPredicate, mlir::arith::CmpIPredicate>;

  const std::pair<mlir::Value, DType>& entry(ScalarValue v) const {
    KILN_CHECK(v.id >= 0 && static_cast<size_t>(v.id) < values_.size(), where_,
               ": expected a ScalarValue made by this builder, found id ", v.id,
               ". Fix: the op's scalar_body must only pass values it got from the builder or "
               "its operands.");
    return values_[static_cast<size_t>(v.id)];
  }

  [[noreturn]] void unsupported(ScalarOp op, DType t) const {
    KILN_FAIL(where_, ": expected ", scalar_op_name(op),
              " on a dtype it supports (see kiln/scalar_body.h), found ", t,
              ". Fix: cast the operand in the op's scalar_body, or leave the op out of the "
              "fusion group for this dtype.");
  }

  static int64_t saturate_to_int64(double v) {
    if (std::isnan(v)) return 0;
    if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
    if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(v);
  }

  // The scalar `attr` as a constant of the current lane count (a splat for vectors).
  mlir::Value splat_constant(mlir::TypedAttr attr) {
    if (lanes_ > 1)
      attr = mlir::DenseElementsAttr::get(mlir::VectorType::get({lanes_}, attr.getType()),
                                          llvm::ArrayRef<mlir::Attribute>{attr});
    return b_.create<mlir::arith::ConstantOp>(loc_, attr);
  }
  mlir::Value bool_const(bool v) {
    return splat_constant(b_.getIntegerAttr(b_.getI1Type(), v ? 1 : 0));
  }
  mlir::Value zero_of(mlir::Type type) {
    mlir::Type element = mlir::getElementTypeOrSelf(type);
    if (mlir::isa<mlir::FloatType>(element)) return splat_constant(b_.getFloatAttr(element, 0.0));
    return splat_constant(b_.getIntegerAttr(element, 0));
  }

  // Float32 exp, log, log1p, tanh and erf stay math ops: the polynomial approximation
  // patterns turn them into arith code that LLVM vectorizes (within 4.3 ulp of the exact
  // result, as accurate as the eager Eigen kernels). Float64 ones without an LLVM intrinsic
  // (the patterns leave float64 alone) call libm.
  mlir::Value floating_unary(ScalarOp op, mlir::Value x, DType t) {
    bool f64 = t == DType::Float64;
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
        return f64 ? libm_call("log1p", x) : b_.create<mlir::math::Log1pOp>(loc_, x).getResult();
      case ScalarOp::Sqrt:
        return b_.create<mlir::math::SqrtOp>(loc_, x);
      case ScalarOp::Rsqrt:
        return b_.create<mlir::math::RsqrtOp>(loc_, x);
      // MLIR's sin/cos approximations lose up to 4e-3 relative accuracy near the zeros
      // (measured in kernels_test.cpp): the LLVM intrinsics (libm's sinf/cosf) instead.
      case ScalarOp::Sin:
        return b_.create<mlir::LLVM::SinOp>(loc_, x);
      case ScalarOp::Cos:
        return b_.create<mlir::LLVM::CosOp>(loc_, x);
      case ScalarOp::Tanh:
        return f64 ? libm_call("tanh", x) : b_.create<mlir::math::TanhOp>(loc_, x).getResult();
      case ScalarOp::Erf:
        return f64 ? libm_call("erf", x) : b_.create<mlir::math::ErfOp>(loc_, x).getResult();
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

  // A call to the C library's `name` (float64), declared once per module; on vectors one
  // call per lane (there is no vector libm to call).
  mlir::Value libm_call(const std::string& name, mlir::Value x) {
    mlir::Type element = mlir::getElementTypeOrSelf(x.getType());
    auto fn = module_.lookupSymbol<mlir::func::FuncOp>(name);
    if (!fn) {
      mlir::OpBuilder decl = mlir::OpBuilder::atBlockBegin(module_.getBody());
      fn = decl.create<mlir::func::FuncOp>(loc_, name, decl.getFunctionType({element}, {element}));
      fn.setPrivate();
    }
    auto vector = mlir::dyn_cast<mlir::VectorType>(x.getType());
    if (!vector) return b_.create<mlir::func::CallOp>(loc_, fn, mlir::ValueRange{x}).getResult(0);
    mlir::Value out = b_.create<mlir::LLVM::PoisonOp>(loc_, vector);
    for (int64_t i = 0; i < vector.getNumElements(); ++i) {
      mlir::Value lane = b_.create<mlir::arith::ConstantOp>(loc_, b_.getI64IntegerAttr(i));
      mlir::Value in = b_.create<mlir::LLVM::ExtractElementOp>(loc_, x, lane);
      mlir::Value r = b_.create<mlir::func::CallOp>(loc_, fn, mlir::ValueRange{in}).getResult(0);
      out = b_.create<mlir::LLVM::InsertElementOp>(loc_, out, r, lane);
    }
    return out;
  }

  // Ordered float predicates (false on NaN) except Ne; signed integer ones; unsigned on
  // Bool, where true (1) > false (0).
  static std::optional<Predicate> comparison(ScalarOp op, DType t) {
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

  mlir::Value arithmetic(ScalarOp op, DType t, mlir::Value x, mlir::Value y) {
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

  mlir::OpBuilder& b_;
  mlir::ModuleOp module_;
  int64_t lanes_ = 1;
  std::string where_ = "[codegen]";
  mlir::Location loc_ = b_.getUnknownLoc();
  std::vector<std::pair<mlir::Value, DType>> values_;
};

// The reduction a row kernel's node performs along the last dim (ScalarOp::Add for sum,
// Max for amax, Min for amin), or nothing for an elementwise node. The fuse pass puts only
// these reductions, over the last dim with keepdim, into row groups.
std::optional<ScalarOp> row_reduction_kind(const ir::Node& n) {
  if (n.op == &ops::sum) return ScalarOp::Add;
  if (n.op == &ops::amax) return ScalarOp::Max;
  if (n.op == &ops::amin) return ScalarOp::Min;
  return std::nullopt;
}

// Checks what the emitter relies on before any MLIR is built, so errors name the kernel.
void check_spec(const FusedKernelSpec& spec) {
  const std::string where = "[codegen] kernel '" + spec.name + "'";
  KILN_CHECK(spec.region != nullptr, where,
             ": expected a fusion region, found none. Fix: build the spec with fused_kernel_spec() "
             "from a fused node.");
  const ir::Graph& region = *spec.region;
  KILN_CHECK(!spec.dims.empty() && spec.broadcast.size() == region.inputs().size(), where,
             ": expected iteration dims and one broadcast row per region input (",
             region.inputs().size(), "), found ", spec.dims.size(), " dims and ",
             spec.broadcast.size(), " rows. Fix: build the spec with fused_kernel_spec().");
  for (const std::vector<bool>& row : spec.broadcast)
    KILN_CHECK(row.size() == spec.dims.size(), where, ": expected ", spec.dims.size(),
               " broadcast flags per input (one per iteration dim), found ", row.size(),
               ". Fix: build the spec with fused_kernel_spec().");
  KILN_CHECK(!region.outputs().empty(), where,
             ": expected the region to have outputs, found none. Fix: the fusion pass must not "
             "create a group without results.");
  auto check_dtype = [&](const ir::Value* v, const std::string& what) {
    KILN_CHECK(supported_dtype(v->type.dtype), where, ": ", what, " has dtype ", v->type.dtype,
               "; expected float32, float64, int32, int64 or bool. Fix: leave it out of the "
               "fusion group (or cast to float32 before it).");
  };
  for (size_t i = 0; i < region.inputs().size(); ++i)
    check_dtype(region.inputs()[i].value, "region input " + std::to_string(i));
  KILN_CHECK(spec.output_per_row.size() == region.outputs().size() &&
                 (spec.rows || std::none_of(spec.output_per_row.begin(), spec.output_per_row.end(),
                                            [](bool b) { return b; })),
             where, ": expected one per-row flag per region output (", region.outputs().size(),
             "), set only in a row kernel, found ", spec.output_per_row.size(),
             " flags. Fix: build the spec with fused_kernel_spec().");
  KILN_CHECK(!spec.rows || spec.dims.size() >= 2, where,
             ": expected a row kernel to have a dim of rows and the reduced dim, found ",
             spec.dims.size(), " iteration dims. Fix: build the spec with fused_kernel_spec().");
  for (const auto& node : region.nodes()) {
    if (spec.rows && row_reduction_kind(*node)) {
      KILN_CHECK(is_floating(node->outputs[0]->type.dtype), where, ": expected the row reduction ",
                 node_str(*node), " to be over float32 or float64, found ",
                 node->outputs[0]->type.dtype, ". Fix: leave it out of the fusion group.");
      continue;
    }
    KILN_CHECK(node->op->scalar_body != nullptr, where, ": op ", node_str(*node),
               " has no scalar body (lowering class ", lowering_class_name(node->op->lowering),
               "). Fix: leave it out of the fusion group; only elementwise ops with a "
               "scalar_body fuse.");
    KILN_CHECK(node->outputs.size() == 1, where, ": expected op ", node_str(*node),
               " to have one output, found ", node->outputs.size(),
               ". Fix: leave it out of the fusion group.");
    for (const ir::Value* in : node->inputs)
      if (in) check_dtype(in, "an operand of op " + node_str(*node));
    check_dtype(node->outputs[0], "op " + node_str(*node));
  }
}

// Outputs of at least this many bytes (all outputs of a kernel together) are written with
// streaming (non-temporal) stores, which go past the caches. A normal store first reads the
// cache line it writes (read-for-ownership), so a kernel reading 3 arrays into 1 output moves 5
// arrays' worth instead of 4. Worth it only where the output would not stay cached for its
// reader anyway: from half of the 32 MiB L3 of the machines measured in docs/perf.md.
constexpr int64_t kStreamingStoreBytes = int64_t{16} << 20;
// A row kernel streams from the size of the whole L3: its input, read once from memory per
// call, and its output together fit the L3 below that and stay cached for the next reader
// (layer_norm over [4096, 1024], 16 MiB each way, ran at 0.78x eager on two threads with
// streaming stores, against 1.7x on one).
constexpr int64_t kRowStreamingStoreBytes = int64_t{32} << 20;
// Each streaming store writes one 64-byte cache line of the widest output, aligned (x86's
// movntps needs aligned addresses). kiln's allocator aligns buffers so; a call whose output
// buffers are not takes the normal loop.
constexpr int64_t kStreamingLineBytes = 64;

// A row kernel's reduction loops keep this many bytes of accumulators (two 64-byte vectors:
// two independent chains of adds per step on AVX-512, four on AVX2).
constexpr int64_t kReductionBytes = 128;

// Builds one kernel: func.func @name(%buffers, %dims, %begin, %end).
//
// A kernel whose outputs can reach kStreamingStoreBytes gets two loop nests, chosen per call:
// the normal one (scalar code that LLVM's loop vectorizer vectorizes) and the streaming one,
// whose innermost dim runs explicit vectors that store whole cache lines of output with
// non-temporal stores, and which ends in a store fence.
class KernelEmitter {
  using ValueMap = std::unordered_map<const ir::Value*, ScalarValue>;

 public:
  // streaming_stores: the target can fence non-temporal stores (x86's sfence).
  KernelEmitter(mlir::ModuleOp module, const FusedKernelSpec& spec, bool streaming_stores)
      : module_(module),
        spec_(spec),
        streaming_stores_(streaming_stores),
        b_(module.getContext()),
        sb_(b_, module) {}

  void emit() {
    const ir::Graph& region = *spec_.region;
    sb_.set_context(spec_.name, nullptr);
    mlir::Location loc = sb_.loc();
    mlir::Type i64 = b_.getI64Type();
    ptr_ = mlir::LLVM::LLVMPointerType::get(b_.getContext());
    b_.setInsertionPointToEnd(module_.getBody());
    auto fn = b_.create<mlir::func::FuncOp>(loc, spec_.name,
                                            b_.getFunctionType({ptr_, ptr_, i64, i64}, {}));
    mlir::Block* entry = fn.addEntryBlock();
    entry_ = entry;
    b_.setInsertionPointToStart(entry);
    b_.create<mlir::func::ReturnOp>(loc);
    b_.setInsertionPointToStart(entry);

    n_in_ = region.inputs().size();
    const size_t n_out = region.outputs().size();
    const size_t rank = spec_.dims.size();
    for (size_t k = 0; k < n_in_ + n_out; ++k)
      buffers_.push_back(load(ptr_, ptr_, entry->getArgument(0), index(static_cast<int64_t>(k))));
    for (size_t d = 0; d < rank; ++d)
      dims_.push_back(spec_.dims[d] >= 0
                          ? index(spec_.dims[d])
                          : load(i64, i64, entry->getArgument(1), index(static_cast<int64_t>(d))));
    begin_ = entry->getArgument(2);
    end_ = entry->getArgument(3);
    for (size_t i = 0; i < n_in_; ++i) input_index_[region.inputs()[i].value] = i;

    // strides_[k][d]: buffer k's element stride along dim d (null where it broadcasts): the
    // product of the sizes of the dims inside d that it does not broadcast along.
    strides_.assign(n_in_ + n_out, std::vector<mlir::Value>(rank));
    for (size_t k = 0; k < n_in_ + n_out; ++k) {
      mlir::Value running;  // null: 1
      for (size_t d = rank; d-- > 0;) {
        if (k < n_in_ && spec_.broadcast[k][d]) continue;
        if (k >= n_in_ && d + 1 == rank && spec_.output_per_row[k - n_in_]) continue;
        strides_[k][d] = running ? running : index(1);
        running = running ? muli(running, dims_[d]) : dims_[d];
      }
    }

    if (spec_.rows) {
      emit_rows();
      return;
    }
    mlir::Value streaming = streaming_condition();
    if (!streaming) {
      emit_nest(/*streaming=*/false);
      return;
    }
    auto branch = b_.create<mlir::scf::IfOp>(loc, streaming, /*withElseRegion=*/true);
    b_.setInsertionPoint(branch.thenBlock()->getTerminator());
    emit_nest(/*streaming=*/true);
    b_.setInsertionPoint(branch.elseBlock()->getTerminator());
    emit_nest(/*streaming=*/false);
  }

 private:
  // Null when the kernel never streams (the target cannot fence, or static dims with outputs
  // below min_bytes); else whether this call does: its outputs reach that size and every
  // output buffer starts on a cache line. Sets lanes_.
  mlir::Value streaming_condition(int64_t min_bytes = kStreamingStoreBytes) {
    if (!streaming_stores_) return {};
    int64_t bytes = 0, widest = 1;  // of all outputs, per iteration index
    for (const auto& out : spec_.region->outputs()) {
      bytes += itemsize(out.value->type.dtype);
      widest = std::max<int64_t>(widest, itemsize(out.value->type.dtype));
    }
    lanes_ = kStreamingLineBytes / widest;
    const int64_t min_indices = (min_bytes + bytes - 1) / bytes;
    bool all_static = true;
    int64_t indices = 1;
    for (int64_t size : spec_.dims) {
      if (size < 0)
        all_static = false;
      else  // saturates at min_indices: no overflow
        indices = std::min(indices * std::min(size, min_indices), min_indices);
    }
    if (all_static && indices < min_indices) return {};
    mlir::Location loc = sb_.loc();
    mlir::Value cond;
    for (size_t k = n_in_; k < buffers_.size(); ++k) {
      mlir::Value address = b_.create<mlir::LLVM::PtrToIntOp>(loc, b_.getI64Type(), buffers_[k]);
      mlir::Value aligned = equal(andi(address, index(kStreamingLineBytes - 1)), index(0));
      cond = cond ? andi(cond, aligned) : aligned;
    }
    if (!all_static) {
      mlir::Value total = dims_[0];
      for (size_t d = 1; d < dims_.size(); ++d) total = muli(total, dims_[d]);
      mlir::Value large = b_.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::sge,
                                                         total, index(min_indices));
      cond = andi(cond, large);
    }
    return cond;
  }

  // One scf.for per dim, dim 0 running [begin, end); in the streaming nest the innermost dim is
  // emit_streaming_row's. Offsets accumulate per level (null: 0), so the innermost loop only
  // adds its induction variable.
  void emit_nest(bool streaming) {
    const size_t rank = dims_.size();
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    std::vector<mlir::Value> offsets(buffers_.size());
    for (size_t d = 0; d < rank; ++d) {
      mlir::Value lb = d == 0 ? begin_ : index(0);
      mlir::Value ub = d == 0 ? end_ : dims_[d];
      if (streaming && d + 1 == rank) {
        emit_streaming_row(offsets, lb, ub);
        break;
      }
      auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), lb, ub, index(1));
      b_.setInsertionPoint(loop.getBody()->getTerminator());
      offsets = advance(std::move(offsets), d, loop.getInductionVar());
    }
    if (!streaming) emit_body(offsets, 1);
    b_.restoreInsertionPoint(after);
    // Streaming stores are weakly ordered: a later plain store (a worker signalling the thread
    // pool that it is done) may become visible before them. Fence them before other threads
    // read the outputs.
    if (streaming)
      b_.create<mlir::LLVM::CallIntrinsicOp>(sb_.loc(), mlir::TypeRange{}, "llvm.x86.sse.sfence",
                                             mlir::ValueRange{});
  }

  // The innermost dim [lo, hi) of the streaming nest, from `row` (the offsets at its index 0).
  // The outputs share their offsets: from the first index j0 where the offset is a multiple of
  // lanes_, each vector of lanes_ elements fills whole aligned lines of every output. The
  // indices before j0 and after the last whole vector run as scalars in one loop.
  void emit_streaming_row(const std::vector<mlir::Value>& row, mlir::Value lo, mlir::Value hi) {
    mlir::Location loc = sb_.loc();
    const size_t d = dims_.size() - 1;
    mlir::Value out_row = row[n_in_] ? row[n_in_] : index(0);
    mlir::Value misaligned = andi(addi(out_row, lo), index(lanes_ - 1));
    mlir::Value head = andi(subi(index(lanes_), misaligned), index(lanes_ - 1));
    mlir::Value j0 = b_.create<mlir::arith::MinSIOp>(loc, addi(lo, head), hi);
    mlir::Value j1 = addi(j0, andi(subi(hi, j0), index(-lanes_)));
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    auto vectors = b_.create<mlir::scf::ForOp>(loc, j0, j1, index(lanes_));
    b_.setInsertionPoint(vectors.getBody()->getTerminator());
    emit_body(advance(row, d, vectors.getInductionVar()), lanes_);
    b_.restoreInsertionPoint(after);

    mlir::Value before = subi(j0, lo);
    auto edges = b_.create<mlir::scf::ForOp>(loc, index(0), addi(before, subi(hi, j1)), index(1));
    b_.setInsertionPoint(edges.getBody()->getTerminator());
    mlir::Value k = edges.getInductionVar();
    mlir::Value in_head =
        b_.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, k, before);
    mlir::Value j =
        addi(k, b_.create<mlir::arith::SelectOp>(loc, in_head, lo, subi(j1, before)).getResult());
    emit_body(advance(row, d, j), 1);
    b_.restoreInsertionPoint(after);
  }

  // A row kernel: one scf.for per dim of rows (dim 0 running [begin, end)), then emit_row.
  void emit_rows() {
    const size_t last = dims_.size() - 1;
    row_streaming_ = row_streaming_condition();
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    std::vector<mlir::Value> row(buffers_.size());
    for (size_t d = 0; d < last; ++d) {
      auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), d == 0 ? begin_ : index(0),
                                              d == 0 ? end_ : dims_[d], index(1));
      b_.setInsertionPoint(loop.getBody()->getTerminator());
      row = advance(std::move(row), d, loop.getInductionVar());
    }
    emit_row(row);
    b_.restoreInsertionPoint(after);
    if (row_streaming_) {  // see emit_nest
      auto fence = b_.create<mlir::scf::IfOp>(sb_.loc(), row_streaming_, false);
      b_.setInsertionPoint(fence.thenBlock()->getTerminator());
      b_.create<mlir::LLVM::CallIntrinsicOp>(sb_.loc(), mlir::TypeRange{}, "llvm.x86.sse.sfence",
                                             mlir::ValueRange{});
      b_.restoreInsertionPoint(after);
    }
  }

  // Whether this call writes the per-element outputs with streaming stores (null: never):
  // when they are large (kRowStreamingStoreBytes) and aligned and every row starts on a whole
  // vector (the last dim a multiple of lanes_), so each vector store is aligned.
  mlir::Value row_streaming_condition() {
    mlir::Value cond = streaming_condition(kRowStreamingStoreBytes);
    if (!cond) return {};
    const int64_t c = spec_.dims.back();
    if (c >= 0 && c % lanes_ != 0) return {};
    mlir::Value whole_rows = equal(andi(dims_.back(), index(lanes_ - 1)), index(0));
    return andi(cond, whole_rows);
  }

  // One row, from `row` (the buffers' offsets at its first element). Values that depend only
  // on the row (inputs broadcast along the last dim, reductions, ops of those) are computed
  // once, in order; each reduction loops over the row computing its operand on the way (so
  // an operand two reductions share is computed twice: cheaper than a round trip through
  // memory for rows that stay in cache); a last loop computes and stores the per-element
  // outputs.
  void emit_row(const std::vector<mlir::Value>& row) {
    const ir::Graph& region = *spec_.region;
    const size_t last = dims_.size() - 1;
    ValueMap per_row;
    for (size_t i = 0; i < n_in_; ++i)
      if (!strides_[i][last]) per_row[region.inputs()[i].value] = load_input(i, row, 1);
    for (const auto& node : region.nodes()) {
      sb_.set_context(spec_.name, node.get());
      if (std::optional<ScalarOp> kind = row_reduction_kind(*node)) {
        per_row[node->outputs[0]] = emit_reduction(*node, *kind, row, per_row);
        continue;
      }
      bool row_only = true;
      for (const ir::Value* in : node->inputs) row_only &= !in || per_row.count(in) > 0;
      if (row_only) per_row[node->outputs[0]] = apply(*node, per_row);
    }
    sb_.set_context(spec_.name, nullptr);
    bool per_element = false;
    for (size_t o = 0; o < region.outputs().size(); ++o) {
      if (spec_.output_per_row[o])
        store_output(o, lookup(per_row, region.outputs()[o].value), row);
      else
        per_element = true;
    }
    if (!per_element) return;
    // Whole vectors of the widest output's cache line, then the rest one by one.
    int64_t widest = 1;
    for (const auto& out : region.outputs())
      widest = std::max<int64_t>(widest, itemsize(out.value->type.dtype));
    const int64_t lanes = kStreamingLineBytes / widest;
    mlir::Value whole = andi(dims_[last], index(-lanes));
    if (!row_streaming_) {
      emit_row_outputs(row, per_row, index(0), whole, lanes, false);
      emit_row_outputs(row, per_row, whole, dims_[last], 1, false);
      return;
    }
    auto branch = b_.create<mlir::scf::IfOp>(sb_.loc(), row_streaming_, true);
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    b_.setInsertionPoint(branch.thenBlock()->getTerminator());
    emit_row_outputs(row, per_row, index(0), dims_[last], lanes, true);
    b_.setInsertionPoint(branch.elseBlock()->getTerminator());
    emit_row_outputs(row, per_row, index(0), whole, lanes, false);
    emit_row_outputs(row, per_row, whole, dims_[last], 1, false);
    b_.restoreInsertionPoint(after);
  }

  // The per-element outputs of a row at indices [lo, hi) of the last dim, `lanes` at a time,
  // with streaming stores (aligned whole vectors only) or plain ones.
  void emit_row_outputs(const std::vector<mlir::Value>& row, const ValueMap& per_row,
                        mlir::Value lo, mlir::Value hi, int64_t lanes, bool streaming) {
    const ir::Graph& region = *spec_.region;
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), lo, hi, index(lanes));
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    sb_.set_lanes(lanes);
    RowPoint point{per_row, advance(row, dims_.size() - 1, loop.getInductionVar()), lanes};
    for (size_t o = 0; o < region.outputs().size(); ++o)
      if (!spec_.output_per_row[o])
        store_output(o, evaluate(region.outputs()[o].value, point), point.offsets, streaming);
    sb_.set_lanes(1);
    b_.restoreInsertionPoint(after);
  }

  // The reduction of `node`'s operand along the row, with explicit vectors (LLVM does not
  // vectorize a NaN-propagating max reduction by itself): a loop of `lanes`-wide accumulators
  // over the row's whole vectors (wider than one register, so the steps form independent
  // chains), the lanes combined pairwise, then a scalar loop over the rest. A sum starts at
  // -0.0 (a row of -0.0 sums to -0.0 as eagerly) and may be reassociated: equal to eager's
  // within rounding, not bitwise.
  //
  // max and min keep a plain compare-and-select accumulator, which x86 does in one
  // instruction but which skips NaN, plus a flag for "saw a NaN" that makes the result NaN at
  // the end, as eager's amax/amin are. (LLVM's NaN-propagating maximum also orders -0 below
  // +0, which costs several instructions per step; eager does not order them either.)
  ScalarValue emit_reduction(const ir::Node& node, ScalarOp kind,
                             const std::vector<mlir::Value>& row, const ValueMap& per_row) {
    mlir::Location loc = sb_.loc();
    const size_t last = dims_.size() - 1;
    const DType t = node.outputs[0]->type.dtype;
    const int64_t lanes = kReductionBytes / itemsize(t);
    const bool extreme = kind != ScalarOp::Add;
    const double inf = std::numeric_limits<double>::infinity();
    const double identity = kind == ScalarOp::Add ? -0.0 : kind == ScalarOp::Max ? -inf : inf;
    auto initial = [&] {
      std::vector<mlir::Value> acc{sb_.value(sb_.constant(identity, t))};
      if (extreme) acc.push_back(sb_.value(sb_.constant(0, DType::Bool)));
      return acc;
    };
    // One loop over [lo, hi) by `step`, carrying `init`; its results.
    auto loop = [&](mlir::Value lo, mlir::Value hi, int64_t step, std::vector<mlir::Value> init) {
      auto op = b_.create<mlir::scf::ForOp>(loc, lo, hi, index(step), init);
      mlir::Block* body = op.getBody();
      if (!body->empty() && mlir::isa<mlir::scf::YieldOp>(body->back())) body->back().erase();
      mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
      b_.setInsertionPointToEnd(body);
      RowPoint point{per_row, advance(row, last, op.getInductionVar()), step};
      mlir::Value x = sb_.value(evaluate(node.inputs[0], point));
      std::vector<mlir::Value> acc(op.getRegionIterArgs().begin(), op.getRegionIterArgs().end());
      b_.create<mlir::scf::YieldOp>(loc, combine(kind, acc, x, x));
      b_.restoreInsertionPoint(after);
      return std::vector<mlir::Value>(op.getResults().begin(), op.getResults().end());
    };

    mlir::Value whole = andi(dims_[last], index(-lanes));
    sb_.set_lanes(lanes);
    std::vector<mlir::Value> acc = loop(index(0), whole, lanes, initial());
    sb_.set_lanes(1);
    for (int64_t width = lanes / 2; width >= 1; width /= 2) {  // halves until one lane is left
      llvm::SmallVector<int32_t> low, high;
      for (int32_t k = 0; k < width; ++k) low.push_back(k), high.push_back(k + width);
      std::vector<mlir::Value> a, b;
      for (mlir::Value v : acc) {
        a.push_back(b_.create<mlir::LLVM::ShuffleVectorOp>(loc, v, v, low));
        b.push_back(b_.create<mlir::LLVM::ShuffleVectorOp>(loc, v, v, high));
      }
      acc = combine(kind, a, b[0], extreme ? b[1] : b[0]);
    }
    for (mlir::Value& v : acc) v = b_.create<mlir::LLVM::ExtractElementOp>(loc, v, index(0));
    acc = loop(whole, dims_[last], 1, acc);
    if (!extreme) return sb_.wrap(acc[0], t);
    mlir::Value nan = sb_.value(sb_.constant(std::numeric_limits<double>::quiet_NaN(), t));
    return sb_.wrap(b_.create<mlir::arith::SelectOp>(loc, acc[1], nan, acc[0]), t);
  }

  // One step of a reduction: `acc` combined with `x`. A sum's adds may be reassociated. max
  // and min take x where it compares greater (less), so never a NaN, and or "x is NaN" into
  // acc[1] (`x_nan`: x itself, or when combining two accumulators the other's flag).
  std::vector<mlir::Value> combine(ScalarOp kind, const std::vector<mlir::Value>& acc,
                                   mlir::Value x, mlir::Value x_nan) {
    mlir::Location loc = sb_.loc();
    if (kind == ScalarOp::Add)
      return {b_.create<mlir::arith::AddFOp>(loc, acc[0], x, mlir::arith::FastMathFlags::reassoc)};
    auto predicate =
        kind == ScalarOp::Max ? mlir::arith::CmpFPredicate::OGT : mlir::arith::CmpFPredicate::OLT;
    mlir::Value better = b_.create<mlir::arith::CmpFOp>(loc, predicate, x, acc[0]);
    mlir::Value value = b_.create<mlir::arith::SelectOp>(loc, better, x, acc[0]);
    mlir::Value is_nan = x_nan;
    if (mlir::isa<mlir::FloatType>(mlir::getElementTypeOrSelf(x_nan.getType())))
      is_nan = b_.create<mlir::arith::CmpFOp>(loc, mlir::arith::CmpFPredicate::UNO, x_nan, x_nan);
    return {value, b_.create<mlir::arith::OrIOp>(loc, acc[1], is_nan)};
  }

  // Where a row kernel evaluates values: the per-row values (scalars), the buffers' offsets
  // at the current index of the last dim, how many consecutive elements at once, and what
  // this point computed so far.
  struct RowPoint {
    const ValueMap& per_row;
    std::vector<mlir::Value> offsets;
    int64_t lanes = 1;
    ValueMap computed;
  };

  // `v` at `point`: a per-row value (in every lane), or loaded, or computed from its operands.
  ScalarValue evaluate(const ir::Value* v, RowPoint& point) {
    if (auto it = point.computed.find(v); it != point.computed.end()) return it->second;
    ScalarValue r;
    if (auto it = point.per_row.find(v); it != point.per_row.end()) {
      r = point.lanes == 1
              ? it->second
              : sb_.wrap(splat(sb_.value(it->second), point.lanes), sb_.dtype(it->second));
    } else if (auto in = input_index_.find(v); in != input_index_.end()) {
      r = load_input(in->second, point.offsets, point.lanes);
    } else {
      const ir::Node& node = *v->producer;
      for (const ir::Value* operand : node.inputs)
        if (operand) evaluate(operand, point);
      sb_.set_context(spec_.name, &node);
      r = apply(node, point.computed);
      sb_.set_context(spec_.name, nullptr);
    }
    point.computed[v] = r;
    return r;
  }

  // The scalar body of elementwise `node` on its operands' values.
  ScalarValue apply(const ir::Node& node, const ValueMap& values) {
    std::vector<ScalarValue> operands;
    // An absent optional operand reaches the body as an invalid ScalarValue (id -1).
    for (const ir::Value* in : node.inputs)
      operands.push_back(in ? lookup(values, in) : ScalarValue{});
    ScalarValue r = node.op->scalar_body(sb_, *node.attrs, operands);
    DType want = node.outputs[0]->type.dtype;
    KILN_CHECK(sb_.dtype(r) == want, "[codegen] kernel '", spec_.name, "', op ", node_str(node),
               ": expected the scalar body to return the op's output dtype ", want, ", found ",
               sb_.dtype(r), ". Fix: cast the result in the op's scalar_body.");
    return r;
  }

  // Region input i at `offsets`: one element, or `lanes` consecutive ones along the innermost
  // dim (the same element in every lane where the input broadcasts along it).
  ScalarValue load_input(size_t i, const std::vector<mlir::Value>& offsets, int64_t lanes) {
    const size_t inner = dims_.size() - 1;
    DType t = spec_.region->inputs()[i].value->type.dtype;
    bool per_lane = lanes > 1 && strides_[i][inner];
    mlir::Type memory = memory_type(t);
    mlir::Value x = load(per_lane ? sb_.shaped(memory) : memory, memory, buffers_[i],
                         offsets[i] ? offsets[i] : index(0), static_cast<unsigned>(itemsize(t)));
    if (t == DType::Bool)
      x = b_.create<mlir::arith::TruncIOp>(
          sb_.loc(), per_lane ? sb_.shaped(b_.getI1Type()) : b_.getI1Type(), x);
    if (lanes > 1 && !per_lane) x = splat(x, lanes);
    return sb_.wrap(x, t);
  }

  // Stores `value` (one element, or a vector of consecutive ones) of region output o at
  // `offsets`; a streaming store needs the address aligned to the vector's size.
  void store_output(size_t o, ScalarValue value, const std::vector<mlir::Value>& offsets,
                    bool streaming = false) {
    DType t = spec_.region->outputs()[o].value->type.dtype;
    mlir::Value x = sb_.value(value);
    if (t == DType::Bool)
      x = b_.create<mlir::arith::ExtUIOp>(sb_.loc(), sb_.shaped(b_.getI8Type()), x);
    mlir::Value offset = offsets[n_in_ + o] ? offsets[n_in_ + o] : index(0);
    const int64_t lanes =
        streaming ? mlir::cast<mlir::VectorType>(x.getType()).getNumElements() : 1;
    b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x,
                                   address(memory_type(t), buffers_[n_in_ + o], offset),
                                   static_cast<unsigned>(lanes * itemsize(t)),
                                   /*isVolatile=*/false, /*isNonTemporal=*/streaming);
  }

  // `offsets` moved to index `iv` of dim d.
  std::vector<mlir::Value> advance(std::vector<mlir::Value> offsets, size_t d, mlir::Value iv) {
    for (size_t k = 0; k < offsets.size(); ++k) {
      if (!strides_[k][d]) continue;
      mlir::Value step = d + 1 == dims_.size() ? iv : muli(iv, strides_[k][d]);
      offsets[k] = offsets[k] ? addi(offsets[k], step) : step;
    }
    return offsets;
  }

  // An i64 constant, made once per function at its entry (where it dominates every use).
  mlir::Value index(int64_t v) {
    auto [it, fresh] = constants_.try_emplace(v);
    if (fresh) {
      mlir::OpBuilder at_entry = mlir::OpBuilder::atBlockBegin(entry_);
      it->second = at_entry.create<mlir::arith::ConstantOp>(sb_.loc(), b_.getI64IntegerAttr(v));
    }
    return it->second;
  }
  mlir::Value addi(mlir::Value a, mlir::Value b) {
    return b_.create<mlir::arith::AddIOp>(sb_.loc(), a, b);
  }
  mlir::Value subi(mlir::Value a, mlir::Value b) {
    return b_.create<mlir::arith::SubIOp>(sb_.loc(), a, b);
  }
  mlir::Value muli(mlir::Value a, mlir::Value b) {
    return b_.create<mlir::arith::MulIOp>(sb_.loc(), a, b);
  }
  mlir::Value andi(mlir::Value a, mlir::Value b) {
    return b_.create<mlir::arith::AndIOp>(sb_.loc(), a, b);
  }
  mlir::Value equal(mlir::Value a, mlir::Value b) {
    return b_.create<mlir::arith::CmpIOp>(sb_.loc(), mlir::arith::CmpIPredicate::eq, a, b);
  }

  mlir::Value address(mlir::Type element, mlir::Value base, mlir::Value offset) {
    return b_.create<mlir::LLVM::GEPOp>(sb_.loc(), ptr_, element, base,
                                        llvm::ArrayRef<mlir::LLVM::GEPArg>{offset},
                                        /*inbounds=*/true);
  }
  // alignment 0: the type's own (right for scalars; vectors pass their element's).
  mlir::Value load(mlir::Type result, mlir::Type element, mlir::Value base, mlir::Value offset,
                   unsigned alignment = 0) {
    return b_.create<mlir::LLVM::LoadOp>(sb_.loc(), result, address(element, base, offset),
                                         alignment);
  }

  mlir::Type memory_type(DType t) {
    return t == DType::Bool ? b_.getI8Type() : sb_.element_type(t);
  }

  // `x` in every lane of a vector.
  mlir::Value splat(mlir::Value x, int64_t lanes) {
    mlir::Location loc = sb_.loc();
    mlir::Value v =
        b_.create<mlir::LLVM::PoisonOp>(loc, mlir::VectorType::get({lanes}, x.getType()));
    v = b_.create<mlir::LLVM::InsertElementOp>(loc, v, x, index(0));
    return b_.create<mlir::LLVM::ShuffleVectorOp>(loc, v, v, llvm::SmallVector<int32_t>(lanes, 0));
  }

  // The region's nodes at `offsets` (null: 0), on scalars (lanes 1) or on vectors of `lanes`
  // consecutive elements of the innermost dim, whose output stores are streaming stores of
  // whole aligned lines (emit_streaming_row makes them so).
  void emit_body(const std::vector<mlir::Value>& offsets, int64_t lanes) {
    const ir::Graph& region = *spec_.region;
    auto offset = [&](size_t k) { return offsets[k] ? offsets[k] : index(0); };
    sb_.set_lanes(lanes);
    ValueMap values;
    for (size_t i = 0; i < n_in_; ++i)
      values[region.inputs()[i].value] = load_input(i, offsets, lanes);
    for (const auto& node : region.nodes()) {
      sb_.set_context(spec_.name, node.get());
      values[node->outputs[0]] = apply(*node, values);
    }
    sb_.set_context(spec_.name, nullptr);
    for (size_t o = 0; o < region.outputs().size(); ++o) {
      const ir::Value* v = region.outputs()[o].value;
      DType t = v->type.dtype;
      mlir::Value x = sb_.value(lookup(values, v));
      if (t == DType::Bool)
        x = b_.create<mlir::arith::ExtUIOp>(sb_.loc(), sb_.shaped(b_.getI8Type()), x);
      mlir::Value at = address(memory_type(t), buffers_[n_in_ + o], offset(n_in_ + o));
      if (lanes == 1)
        b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x, at);
      else
        b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x, at, static_cast<unsigned>(lanes * itemsize(t)),
                                       /*isVolatile=*/false, /*isNonTemporal=*/true);
    }
    sb_.set_lanes(1);
  }

  ScalarValue lookup(const ValueMap& values, const ir::Value* v) {
    auto it = values.find(v);
    KILN_CHECK(it != values.end(), "[codegen] kernel '", spec_.name, "': expected value %", v->id,
               " to be defined earlier in the region, found no definition. Fix: the "
               "region must be in definition order (ir::verify checks it).");
    return it->second;
  }

  mlir::ModuleOp module_;
  const FusedKernelSpec& spec_;
  bool streaming_stores_ = false;
  mlir::OpBuilder b_;
  MlirScalarBuilder sb_;
  mlir::Type ptr_;
  mlir::Block* entry_ = nullptr;
  std::map<int64_t, mlir::Value> constants_;
  size_t n_in_ = 0;
  std::vector<mlir::Value> buffers_;  // the region inputs' data pointers, then the outputs'
  std::vector<mlir::Value> dims_;
  std::vector<std::vector<mlir::Value>> strides_;
  mlir::Value begin_, end_;
  int64_t lanes_ = 1;          // of the streaming loop's vectors
  mlir::Value row_streaming_;  // a row kernel's row_streaming_condition
  std::unordered_map<const ir::Value*, size_t> input_index_;  // region input -> its index
};

std::string print_op(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

// "znver3 +avx2,+fma": the CPU and the vector features that matter for these kernels.
std::string describe_target(const llvm::TargetMachine& tm) {
  std::string cpu = tm.getTargetCPU().str();
  std::string out = cpu.empty() ? "generic" : cpu;
  std::string features = "," + tm.getTargetFeatureString().str() + ",";
  std::string listed;
  for (const char* f : {"+avx2", "+fma", "+avx512f"})
    if (features.find(std::string(",") + f + ",") != std::string::npos)
      listed += (listed.empty() ? "" : ",") + std::string(f);
  return listed.empty() ? out : out + " " + listed;
}

// The host CPU with its features (or the process's generic CPU), at the highest code-gen
// level; the JIT is built from the same builder, so cached and fresh code match.
llvm::orc::JITTargetMachineBuilder target_builder(bool host_cpu_features) {
  llvm::orc::JITTargetMachineBuilder jtmb(llvm::Triple(llvm::sys::getProcessTriple()));
  if (host_cpu_features) {
    llvm::Expected<llvm::orc::JITTargetMachineBuilder> host =
        llvm::orc::JITTargetMachineBuilder::detectHost();
    KILN_CHECK(bool(host), "[codegen] expected LLVM to detect the host CPU, got: ",
               llvm_error_text(host.takeError()), ". Fix: check that LLVM supports this host.");
    jtmb = std::move(*host);
  }
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  return jtmb;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(llvm::orc::JITTargetMachineBuilder& jtmb) {
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm = jtmb.createTargetMachine();
  KILN_CHECK(bool(tm), "[codegen] expected an LLVM TargetMachine for the host, got: ",
             llvm_error_text(tm.takeError()), ". Fix: check that LLVM supports this host.");
  return std::move(*tm);
}

// Everything about the target the machine code depends on, for the cache key.
std::string full_target(const llvm::TargetMachine& tm) {
  return tm.getTargetTriple().str() + " " + tm.getTargetCPU().str() + " " +
         tm.getTargetFeatureString().str();
}

class JitKernelModule final : public KernelModule {
 public:
  KernelFn lookup(const std::string& name) const override {
    auto it = kernels_.find(name);
    if (it != kernels_.end()) return it->second;
    std::string names;
    for (const auto& [n, fn] : kernels_) names += (names.empty() ? "" : ", ") + n;
    KILN_FAIL("[codegen] expected a kernel named '", name, "' in this module, found only: ", names,
              ". Fix: look up a name given in an FusedKernelSpec.");
  }
  const CodegenTimings& timings() const override { return timings_; }
  const std::string& mlir_text() const override { return mlir_text_; }
  const std::string& target() const override { return target_; }
  const std::string& target_arch() const override { return target_arch_; }
  const std::string& target_cpu() const override { return target_cpu_; }
  const std::vector<std::string>& target_features() const override { return target_features_; }
  bool from_cache() const override { return from_cache_; }
  const std::string& cache_note() const override { return cache_note_; }
  const std::string& object() const override { return object_; }

  std::unique_ptr<llvm::orc::LLJIT> jit;  // owns the kernels' machine code
  std::string object_;
  std::map<std::string, KernelFn> kernels_;
  CodegenTimings timings_;
  std::string mlir_text_;
  std::string target_;
  std::string target_arch_, target_cpu_;
  std::vector<std::string> target_features_;
  bool from_cache_ = false;
  std::string cache_note_;
};

// The MLIR passes from the scf/arith/math kernels to the LLVM dialect (after the math
// approximations, see lower_to_llvm). Built before lowering so the cache key can name them.
void add_lowering_passes(mlir::PassManager& pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createConvertSCFToCFPass());
  pm.addPass(mlir::createConvertVectorToLLVMPass());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
}

// Math ops to arith code the loop vectorizer can vectorize (float32 only; the patterns
// leave float64 alone), then everything to the LLVM dialect through `pm`.
void lower_to_llvm(mlir::MLIRContext* ctx, mlir::ModuleOp module, bool has_fma,
                   mlir::PassManager& pm, DiagnosticCollector& diags) {
  mlir::RewritePatternSet approximations(ctx);
  mlir::populateMathPolynomialApproximationPatterns(approximations);
  // The approximations emit math.fma, which without FMA hardware would become a libm call
  // per element: expand it to a multiply and an add there.
  if (!has_fma) mlir::populateExpandFmaFPattern(approximations);
  bool ok = mlir::succeeded(mlir::applyPatternsAndFoldGreedily(module, std::move(approximations)));
  KILN_CHECK(ok, "[codegen] expected the math approximations to converge, got:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cpu/codegen/kernels.cpp.");
  ok = mlir::succeeded(pm.run(module));
  KILN_CHECK(ok, "[codegen] expected the kernels to lower to the LLVM dialect, got MLIR errors:\n",
             diags.take(), "Fix: this is a kiln bug in backends/cpu/codegen/kernels.cpp.");
}

// The code generator's part of the cache key: what turns the same MLIR into other machine
// code. kiln's version, and kCodegenRevision for changes between versions.
std::string compiler_description(const mlir::PassManager& pm, bool has_fma,
                                 const CodegenOptions& options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "kiln " << KILN_VERSION_STRING << "; codegen revision " << kCodegenRevision << "; LLVM "
     << LLVM_VERSION_STRING << "; " << (options.host_cpu_features ? "host cpu" : "portable")
     << (options.position_independent ? "; position independent" : "") << "; math approximations"
     << (has_fma ? "" : " with fma expanded") << "; pipeline ";
  pm.printAsTextualPipeline(os);
  os << "; LLVM O3, codegen Aggressive";
  return text;
}

// LLVM IR, LLVM -O3 and the relocatable object file: what the JIT would compile on the first
// lookup, made explicitly so the very same bytes can go to the cache and to the JIT.
std::string emit_object(mlir::ModuleOp module, llvm::TargetMachine& tm,
                        DiagnosticCollector& diags) {
  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> llvm_module =
      mlir::translateModuleToLLVMIR(module, llvm_ctx, "kiln.kernels");
  KILN_CHECK(llvm_module != nullptr,
             "[codegen] expected the lowered kernels to translate to LLVM IR, got:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cpu/codegen/kernels.cpp.");
  llvm_module->setDataLayout(tm.createDataLayout());
  llvm_module->setTargetTriple(tm.getTargetTriple().getTriple());
  if (llvm::Error error =
          mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, &tm)(llvm_module.get()))
    KILN_FAIL(
        "[codegen] expected LLVM to optimize the kernels, got: ", llvm_error_text(std::move(error)),
        ". Fix: this is a kiln bug in backends/cpu/codegen/kernels.cpp.");
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  bool unsupported =
      tm.addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile);
  KILN_CHECK(!unsupported, "[codegen] expected LLVM to emit object files for ", full_target(tm),
             ", found it cannot. Fix: check that LLVM supports this host.");
  codegen.run(*llvm_module);
  return std::string(object.data(), object.size());
}

// The JIT only links objects (emit_object's or the cache's): it is never asked to compile IR.
class ObjectsOnly final : public llvm::orc::IRCompileLayer::IRCompiler {
 public:
  ObjectsOnly() : IRCompiler(llvm::orc::IRSymbolMapper::ManglingOptions()) {}
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> operator()(llvm::Module&) override {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kiln's kernel JIT links object files only");
  }
};

// Links `object` into a fresh JIT and resolves every kernel in `names` into `module`: the one
// path of fresh compiles and cache hits. Returns "" or LLVM's error.
std::string link_object(JitKernelModule& module, std::string_view object,
                        const llvm::orc::JITTargetMachineBuilder& jtmb,
                        const llvm::DataLayout& layout, const std::vector<std::string>& names) {
  // RuntimeDyld with SectionMemoryManager, as mlir::ExecutionEngine links; no platform
  // runtime (kernels have no static constructors).
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(jtmb)
          .setDataLayout(layout)
          .setLinkProcessSymbolsByDefault(false)
          .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
          .setCompileFunctionCreator(
              [](llvm::orc::JITTargetMachineBuilder)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                return std::make_unique<ObjectsOnly>();
              })
          .setObjectLinkingLayerCreator(
              [](llvm::orc::ExecutionSession& session,
                 const llvm::Triple&) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                    session, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
              })
          .create();
  if (!jit) return llvm_error_text(jit.takeError());
  // libm (sinf, log1p, ...) and the C library come from the process.
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(layout.getGlobalPrefix());
  if (!process) return llvm_error_text(process.takeError());
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  if (llvm::Error error = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(object.data(), object.size()), "kiln.kernels.o")))
    return llvm_error_text(std::move(error));
  std::map<std::string, KernelFn> kernels;
  for (const std::string& name : names) {
    llvm::Expected<llvm::orc::ExecutorAddr> address = (*jit)->lookup(name);
    if (!address) return "kernel '" + name + "': " + llvm_error_text(address.takeError());
    kernels[name] = address->toPtr<KernelFn>();
  }
  module.jit = std::move(*jit);
  module.kernels_ = std::move(kernels);
  return "";
}

}  // namespace

std::unique_ptr<KernelModule> compile_kernels(std::span<const FusedKernelSpec> kernels,
                                              const CodegenOptions& options) {
  std::set<std::string> unique_names;
  std::vector<std::string> names;
  for (const FusedKernelSpec& spec : kernels) {
    check_spec(spec);
    KILN_CHECK(unique_names.insert(spec.name).second,
               "[codegen] expected unique kernel names, found '", spec.name,
               "' twice. Fix: number the kernels of a module (fused_0, fused_1, ...).");
    names.push_back(spec.name);
  }
  init_llvm_once();
  auto result = std::make_unique<JitKernelModule>();

  Clock::time_point start = Clock::now();
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::math::MathDialect, mlir::scf::SCFDialect,
                  // the math approximations on the streaming loop's vectors make vector ops
                  mlir::vector::VectorDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);  // also inserts the LLVM dialect
  // No MLIR thread pool: kiln owns the only one.
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  DiagnosticCollector diags(&ctx);

  llvm::orc::JITTargetMachineBuilder jtmb = target_builder(options.host_cpu_features);
  if (options.position_independent) jtmb.setRelocationModel(llvm::Reloc::PIC_);
  std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(jtmb);
  const llvm::DataLayout layout = tm->createDataLayout();

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::NameLoc::get(mlir::StringAttr::get(&ctx, "kiln.kernels")));
  // Streaming stores only where the kernel can fence them (x86's sfence).
  const bool streaming_stores = tm->getTargetTriple().isX86();
  for (const FusedKernelSpec& spec : kernels) KernelEmitter(*module, spec, streaming_stores).emit();
  bool verified = mlir::succeeded(mlir::verify(*module));
  KILN_CHECK(verified, "[codegen] expected the generated kernels to verify, got:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cpu/codegen/kernels.cpp (or a scalar_body).");
  result->target_ = describe_target(*tm);
  result->target_arch_ = tm->getTargetTriple().getArchName().str();
  result->target_cpu_ = tm->getTargetCPU().empty() ? "generic" : tm->getTargetCPU().str();
  llvm::SmallVector<llvm::StringRef> features;
  tm->getTargetFeatureString().split(features, ',');
  for (llvm::StringRef f : features)
    if (f.consume_front("+")) result->target_features_.push_back(f.str());
  bool has_fma = result->target_.find("+fma") != std::string::npos;
  mlir::PassManager pm(&ctx);
  add_lowering_passes(pm);

  // The key hashes the MLIR text: building it costs ~1-2 ms, the LLVM part it saves ~20-50.
  KernelCache cache(options.cache_dir);
  std::string key;
  if (options.keep_ir || cache.enabled()) {
    std::string text = print_op(*module);
    if (cache.enabled())
      key = kernel_cache_key({text, full_target(*tm), compiler_description(pm, has_fma, options)});
    if (options.keep_ir) result->mlir_text_ = std::move(text);
  }
  result->timings_.build_ms = ms_since(start);

  std::string unusable;  // why an existing entry was not used
  if (cache.enabled()) {
    start = Clock::now();
    std::optional<KernelCacheEntry> entry = cache.load(key, unusable);
    if (entry && entry->kernels != names) unusable = "it defines other kernels";
    if (entry && unusable.empty()) {
      unusable = link_object(*result, entry->object, jtmb, layout, names);
      if (!unusable.empty()) unusable = "the JIT cannot link it: " + unusable;
    }
    result->timings_.load_ms = ms_since(start);
    if (entry && unusable.empty()) {
      result->from_cache_ = true;
      result->cache_note_ = "cache hit " + cache.path(key);
      result->object_ = std::move(entry->object);
      return result;
    }
  }

  start = Clock::now();
  lower_to_llvm(&ctx, *module, has_fma, pm, diags);
  result->timings_.lower_ms = ms_since(start);

  start = Clock::now();
  std::string object = emit_object(*module, *tm, diags);
  if (!cache.enabled()) {
    result->cache_note_ = cache.note();
  } else {
    std::string failed = cache.store(key, {object, names});
    std::string path = cache.path(key);
    if (!failed.empty())
      result->cache_note_ = "cache unwritable: " + failed + "; compiled without caching";
    else if (!unusable.empty())
      result->cache_note_ =
          "cache entry " + path + " unusable (" + unusable + "): recompiled and rewritten";
    else
      result->cache_note_ = "cache miss (written " + path + ")";
    if (failed.empty())
      if (int evicted = cache.evict(key))
        result->cache_note_ += "; evicted " + std::to_string(evicted) +
                               " least recently used entries (limit KILN_CACHE_MAX_MB)";
  }
  result->timings_.llvm_ms = ms_since(start);

  start = Clock::now();
  std::string error = link_object(*result, object, jtmb, layout, names);
  KILN_CHECK(error.empty(), "[codegen] expected the JIT to link the compiled kernels, got: ", error,
             ". Fix: this is a kiln bug in backends/cpu/codegen/kernels.cpp.");
  result->timings_.load_ms += ms_since(start);
  result->object_ = std::move(object);
  return result;
}

}  // namespace kiln::codegen
