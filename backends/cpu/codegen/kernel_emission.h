// The class that builds a CPU kernel's MLIR: KernelEmitter (loop_emission.cpp, row kernels in
// row_emission.cpp) builds the kernel's function, loops, loads and stores around the ops'
// scalar bodies, which codegen_common::MlirScalarBuilder turns into arith/math values. Only
// those two translation units include this header: it needs MLIR's IR headers, but no
// dialect's (each stage includes the dialects it uses).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/codegen_common/scalar_builder.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "stages.h"

namespace kiln::cpu::codegen::detail {

using codegen_common::MlirScalarBuilder;

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
        sb_(b_, module, codegen_common::MathLibrary::Cpu, "codegen") {}

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
  ScalarValue apply(const ir::Node& node, const ValueMap& values) {
    return sb_.apply(spec_.name, node, values);
  }
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
  mlir::Type memory_type(DType t) { return sb_.memory_type(t); }
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
