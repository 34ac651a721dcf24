// The ops' scalar bodies as MLIR: MlirScalarBuilder implements kiln's ScalarBuilder
// (kiln/scalar_body.h) with arith and math ops, so each op's one scalar_body becomes the
// computation inside a generated kernel, on the CPU and on the GPU alike. Only the code
// generators include this header: it needs MLIR's IR headers (each generator includes the
// dialects it builds ops of).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/scalar_body.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
class DialectRegistry;
}  // namespace mlir

namespace kiln::codegen_common {

// Where the transcendental functions come from, which decides how a math op is built.
enum class MathLibrary {
  // The CPU: float32 exp, log, log1p, tanh and erf stay math ops (the polynomial
  // approximation patterns make them vectorizable arith code); sin and cos are LLVM
  // intrinsics (libm's); float64 log1p, tanh and erf call libm.
  Cpu,
  // NVIDIA's libdevice: every function stays a math op, which the NVVM conversion turns into
  // a call of libdevice's __nv_* function (its float64 ones too).
  Libdevice,
};

// The scalar bodies' values as MLIR SSA values at the builder's insertion point: scalars, or
// vectors of `lanes` elements (arith and math ops apply lane by lane, so one scalar_body serves
// both). Bool is i1 in registers (i8 in memory). Errors name the generator, the kernel and the
// op whose body is being built.
class MlirScalarBuilder final : public ScalarBuilder {
 public:
  // `generator` names the code generator in errors ("codegen", "cuda codegen"); `module`
  // receives the declarations of the libm functions a Cpu kernel calls.
  MlirScalarBuilder(mlir::OpBuilder& b, mlir::ModuleOp module, MathLibrary math,
                    std::string generator)
      : b_(b), module_(module), math_(math), generator_(std::move(generator)) {}

  // 1: values are scalars; more: vectors of that many lanes.
  void set_lanes(int64_t lanes) { lanes_ = lanes; }
  // `element` as a value of the current lane count.
  mlir::Type shaped(mlir::Type element) const {
    return lanes_ == 1 ? element : mlir::VectorType::get({lanes_}, element);
  }

  // Where the next values come from, for error messages and MLIR locations.
  void set_context(const std::string& kernel, const ir::Node* node);
  mlir::Location loc() const { return loc_; }
  // "[codegen] kernel 'fused_0'": how errors start.
  const std::string& where() const { return where_; }

  ScalarValue wrap(mlir::Value v, DType t) {
    values_.emplace_back(v, t);
    return ScalarValue{static_cast<int32_t>(values_.size() - 1)};
  }
  mlir::Value value(ScalarValue v) const { return entry(v).first; }

  DType dtype(ScalarValue v) const override { return entry(v).second; }
  ScalarValue constant(double value, DType t) override;
  ScalarValue unary(ScalarOp op, ScalarValue a) override;
  ScalarValue binary(ScalarOp op, ScalarValue a, ScalarValue b) override;
  ScalarValue select(ScalarValue cond, ScalarValue a, ScalarValue b) override;
  ScalarValue cast(ScalarValue a, DType to) override;

  mlir::Type register_type(DType t) { return shaped(element_type(t)); }
  mlir::Type element_type(DType t);
  // The type an element has in memory: bool is one byte.
  mlir::Type memory_type(DType t) { return t == DType::Bool ? b_.getI8Type() : element_type(t); }
  void check_dtype(DType t, const char* what) const;

  // The scalar body of elementwise `node` on `values` (its operands' values, by IR value;
  // an absent optional operand reaches the body as an invalid ScalarValue). Checks that the
  // body returns the op's output dtype. Sets the context to `node` while it builds.
  ScalarValue apply(const std::string& kernel, const ir::Node& node,
                    const std::unordered_map<const ir::Value*, ScalarValue>& values);

 private:
  const std::pair<mlir::Value, DType>& entry(ScalarValue v) const;
  [[noreturn]] void unsupported(ScalarOp op, DType t) const;

  // The scalar `attr` as a constant of the current lane count (a splat for vectors).
  mlir::Value splat_constant(mlir::TypedAttr attr);
  mlir::Value bool_const(bool v);
  mlir::Value zero_of(mlir::Type type);
  mlir::Value floating_unary(ScalarOp op, mlir::Value x, DType t);
  mlir::Value libm_call(const std::string& name, mlir::ValueRange args);
  mlir::Value arithmetic(ScalarOp op, DType t, mlir::Value x, mlir::Value y);

  mlir::OpBuilder& b_;
  mlir::ModuleOp module_;
  MathLibrary math_;
  std::string generator_;
  int64_t lanes_ = 1;
  std::string where_ = "[" + generator_ + "]";
  mlir::Location loc_ = b_.getUnknownLoc();
  std::vector<std::pair<mlir::Value, DType>> values_;
};

// The dialects MlirScalarBuilder makes ops of.
void register_scalar_body_dialects(mlir::DialectRegistry& registry);

}  // namespace kiln::codegen_common
