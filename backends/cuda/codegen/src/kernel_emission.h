// The class that builds one GPU kernel's MLIR (gpu dialect): KernelEmitter. Elementwise kernels
// and what every kernel uses are in kernel_emission.cpp, row kernels in row_emission.cpp; the
// ops' scalar bodies come from codegen_common::MlirScalarBuilder with libdevice's math. Only
// those two translation units include this header (it needs MLIR's IR headers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/codegen_common/scalar_builder.h"
#include "kiln/cpu/exec/kernel_spec.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
class DialectRegistry;
}  // namespace mlir

namespace kiln::cuda::codegen::detail {

// The dialects the emitters make ops of (gpu, func, scf, arith, llvm).
void register_emission_dialects(mlir::DialectRegistry& registry);

// Appends the kernel of `spec` to the gpu.module whose body is `gpu_module_body` (inside
// `module`): gpu.func @name(ptr x buffers, i64 x dims) kernel (see kiln/cuda/codegen/ptx.h).
void emit_kernel(mlir::ModuleOp module, mlir::Block* gpu_module_body,
                 const cpu::exec::FusedKernelSpec& spec);

// The same kernel for the CPU (emulation.h): func.func @name(ptr x buffers, i64 x dims,
// i64 block, i64 blocks), appended to `module`. It is the GPU kernel as one thread of one
// block of a grid of one-thread blocks would run it: the same loops, offsets and bodies, with
// the thread index 0, the block size 1, and each block-wide reduction that thread's own value.
void emit_emulated_kernel(mlir::ModuleOp module, const cpu::exec::FusedKernelSpec& spec);

// The elements one thread of a one-dim elementwise kernel reads and writes at once: 128 bits of
// 4-byte types.
constexpr int64_t kVectorLanes = 4;

class KernelEmitter {
  using ValueMap = std::unordered_map<const ir::Value*, ScalarValue>;

 public:
  // gpu_module_body null: the emulated kernel, a func.func at the end of `module`.
  KernelEmitter(mlir::ModuleOp module, mlir::Block* gpu_module_body,
                const cpu::exec::FusedKernelSpec& spec)
      : spec_(spec),
        module_(module),
        gpu_module_body_(gpu_module_body),
        b_(module.getContext()),
        sb_(b_, module, codegen_common::MathLibrary::Libdevice, "cuda codegen") {}

  void emit();

 private:
  // Where a row kernel evaluates values: the per-row values, the buffers' offsets at the
  // current element of the row, and what this element computed so far.
  struct RowPoint {
    const ValueMap& per_row;
    std::vector<mlir::Value> offsets;
    ValueMap computed;
  };

  // ---- kernel_emission.cpp: elementwise kernels and what every kernel uses
  // The kernel's function and its entry block (a gpu.func, or the emulated func.func).
  mlir::Block* emit_function(const std::vector<mlir::Type>& params);
  void emit_elementwise();
  void emit_scalar_loop(mlir::Value start, mlir::Value end);
  mlir::Value vectors_aligned();
  void emit_vector(mlir::Value base);
  DType buffer_dtype(size_t k) const;  // region input k, or output k - inputs
  // The global index of this thread (block * block_dim + thread), and the grid's threads.
  mlir::Value global_thread();
  mlir::Value grid_threads();
  mlir::Value thread_in_block();
  mlir::Value block_size();
  mlir::Value block_in_grid();
  mlir::Value grid_size();
  // The buffers' element offsets at flat index `linear` of dims [0, ndims) (row-major).
  std::vector<mlir::Value> offsets_at(mlir::Value linear, size_t ndims);
  // `offsets` moved by `iv` along dim d.
  std::vector<mlir::Value> advance(std::vector<mlir::Value> offsets, size_t d, mlir::Value iv);
  ScalarValue load_input(size_t i, const std::vector<mlir::Value>& offsets);
  void store_output(size_t o, ScalarValue value, const std::vector<mlir::Value>& offsets);
  mlir::Value product(size_t first, size_t last);  // of dims_[first, last)
  mlir::Value index(int64_t v);
  mlir::Value addi(mlir::Value a, mlir::Value b);
  mlir::Value muli(mlir::Value a, mlir::Value b);
  mlir::Value address(mlir::Type element, mlir::Value base, mlir::Value offset);

  // ---- row_emission.cpp: row kernels
  void emit_rows();
  void emit_row(const std::vector<mlir::Value>& row);
  ScalarValue emit_reduction(const ir::Node& node, ScalarOp kind,
                             const std::vector<mlir::Value>& row, const ValueMap& per_row);
  // An scf.for over this thread's elements of the row (from its thread index to the row's end,
  // by the block's size) whose body `body` builds at each element's offsets, given the values
  // the loop carries (`init` first) and returning their next ones. Returns the last ones.
  using RowBody = std::function<std::vector<mlir::Value>(const std::vector<mlir::Value>& offsets,
                                                         const std::vector<mlir::Value>& carried)>;
  std::vector<mlir::Value> row_loop(const std::vector<mlir::Value>& row,
                                    const std::vector<mlir::Value>& init, const RowBody& body);
  ScalarValue evaluate(const ir::Value* v, RowPoint& point);

  const cpu::exec::FusedKernelSpec& spec_;
  mlir::ModuleOp module_;
  mlir::Block* gpu_module_body_;  // null when emulating
  bool emulated() const { return gpu_module_body_ == nullptr; }
  mlir::OpBuilder b_;
  codegen_common::MlirScalarBuilder sb_;
  mlir::Type ptr_;
  mlir::Block* entry_ = nullptr;
  std::map<int64_t, mlir::Value> constants_;
  size_t n_in_ = 0;
  std::vector<mlir::Value> buffers_;  // the region inputs' device pointers, then the outputs'
  std::vector<mlir::Value> dims_;
  std::vector<std::vector<mlir::Value>> strides_;  // [buffer][dim], null where it broadcasts
  std::unordered_map<const ir::Value*, size_t> input_index_;  // region input -> its index
};

}  // namespace kiln::cuda::codegen::detail
