// The two classes that build a kernel's MLIR, shared by the emission stages:
// MlirScalarBuilder (scalar_body_to_mlir.cpp) turns ops' scalar bodies into arith/math
// values; KernelEmitter (loop_emission.cpp, row kernels in row_emission.cpp) builds the
// kernel's function, loops, loads and stores around them. Only those three translation
// units include this header: it needs MLIR's IR headers, but no dialect's (each stage
// includes the dialects it uses).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "stages.h"

namespace kiln::cpu::codegen::detail {

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
  void set_context(const std::string& kernel, const ir::Node* node);
  mlir::Location loc() const { return loc_; }

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
  void check_dtype(DType t, const char* what) const;

 private:
  const std::pair<mlir::Value, DType>& entry(ScalarValue v) const;
  [[noreturn]] void unsupported(ScalarOp op, DType t) const;

  // The scalar `attr` as a constant of the current lane count (a splat for vectors).
  mlir::Value splat_constant(mlir::TypedAttr attr);
  mlir::Value bool_const(bool v);
  mlir::Value zero_of(mlir::Type type);
  mlir::Value floating_unary(ScalarOp op, mlir::Value x, DType t);
  mlir::Value libm_call(const std::string& name, mlir::Value x);
  mlir::Value arithmetic(ScalarOp op, DType t, mlir::Value x, mlir::Value y);

  mlir::OpBuilder& b_;
  mlir::ModuleOp module_;
  int64_t lanes_ = 1;
  std::string where_ = "[codegen]";
  mlir::Location loc_ = b_.getUnknownLoc();
  std::vector<std::pair<mlir::Value, DType>> values_;
};

// Outputs of at least this many bytes (all outputs of a kernel together) are written with
// streaming (non-temporal) stores, which go past the caches. A normal store first reads the
// cache line it writes (read-for-ownership), so a kernel reading 3 arrays into 1 output moves 5
// arrays' worth instead of 4. Worth it only where the output would not stay cached for its
// reader anyway: from half of the 32 MiB L3 of the machines measured in docs/perf.md.
constexpr int64_t kStreamingStoreBytes = int64_t{16} << 20;
// Each streaming store writes one 64-byte cache line of the widest output, aligned (x86's
// movntps needs aligned addresses). kiln's allocator aligns buffers so; a call whose output
// buffers are not takes the normal loop.
constexpr int64_t kStreamingLineBytes = 64;

// Builds one kernel: func.func @name(%buffers, %dims, %begin, %end).
//
// A kernel whose outputs can reach kStreamingStoreBytes gets two loop nests, chosen per call:
// the normal one (scalar code that LLVM's loop vectorizer vectorizes) and the streaming one,
// whose innermost dim runs explicit vectors that store whole cache lines of output with
// non-temporal stores, and which ends in a store fence. A row kernel (spec.rows) gets the
// loops of row_emission.cpp instead.
class KernelEmitter {
  using ValueMap = std::unordered_map<const ir::Value*, ScalarValue>;

 public:
  // streaming_stores: the target can fence non-temporal stores (x86's sfence).
  KernelEmitter(mlir::ModuleOp module, const exec::FusedKernelSpec& spec, bool streaming_stores)
      : module_(module),
        spec_(spec),
        streaming_stores_(streaming_stores),
        b_(module.getContext()),
        sb_(b_, module) {}

  void emit();

 private:
  // Where a row kernel evaluates values: the per-row values (scalars), the buffers' offsets
  // at the current index of the last dim, how many consecutive elements at once, and what
  // this point computed so far.
  struct RowPoint {
    const ValueMap& per_row;
    std::vector<mlir::Value> offsets;
    int64_t lanes = 1;
    ValueMap computed;
  };

  // ---- loop_emission.cpp: elementwise kernels and what every kernel uses
  mlir::Value streaming_condition(int64_t min_bytes = kStreamingStoreBytes);
  void emit_nest(bool streaming);
  void emit_streaming_row(const std::vector<mlir::Value>& row, mlir::Value lo, mlir::Value hi);
  void emit_body(const std::vector<mlir::Value>& offsets, int64_t lanes);
  ScalarValue apply(const ir::Node& node, const ValueMap& values);
  ScalarValue load_input(size_t i, const std::vector<mlir::Value>& offsets, int64_t lanes);
  void store_output(size_t o, ScalarValue value, const std::vector<mlir::Value>& offsets,
                    bool streaming = false);
  std::vector<mlir::Value> advance(std::vector<mlir::Value> offsets, size_t d, mlir::Value iv);
  ScalarValue lookup(const ValueMap& values, const ir::Value* v);
  mlir::Value index(int64_t v);
  mlir::Value addi(mlir::Value a, mlir::Value b);
  mlir::Value subi(mlir::Value a, mlir::Value b);
  mlir::Value muli(mlir::Value a, mlir::Value b);
  mlir::Value andi(mlir::Value a, mlir::Value b);
  mlir::Value equal(mlir::Value a, mlir::Value b);
  mlir::Value address(mlir::Type element, mlir::Value base, mlir::Value offset);
  mlir::Value load(mlir::Type result, mlir::Type element, mlir::Value base, mlir::Value offset,
                   unsigned alignment = 0);
  mlir::Type memory_type(DType t);
  mlir::Value splat(mlir::Value x, int64_t lanes);

  // ---- row_emission.cpp: row kernels
  void emit_rows();
  mlir::Value row_streaming_condition();
  void emit_row(const std::vector<mlir::Value>& row);
  void emit_row_outputs(const std::vector<mlir::Value>& row, const ValueMap& per_row,
                        mlir::Value lo, mlir::Value hi, int64_t lanes, bool streaming);
  ScalarValue emit_reduction(const ir::Node& node, ScalarOp kind,
                             const std::vector<mlir::Value>& row, const ValueMap& per_row);
  std::vector<mlir::Value> combine(ScalarOp kind, const std::vector<mlir::Value>& acc,
                                   mlir::Value x, mlir::Value x_nan);
  ScalarValue evaluate(const ir::Value* v, RowPoint& point);

  mlir::ModuleOp module_;
  const exec::FusedKernelSpec& spec_;
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

}  // namespace kiln::cpu::codegen::detail
