// The GPU code generator's stages and what they hand each other; private to
// backends/cuda/codegen (the public interface is kiln/cuda/codegen/ptx.h). MLIR types are only
// declared here, so compile_ptx.cpp needs no dialect's headers.
//
// compile_ptx (compile_ptx.cpp) runs them in this order:
//   (codegen_common)       each exec::FusedKernelSpec is checked before any MLIR is built
//   kernel_emission.cpp    each spec becomes a gpu.func in one gpu.module: parameters, the
//   row_emission.cpp       grid-stride loops, loads and stores (a row kernel's block-wide
//                          reductions), around the ops' scalar bodies (codegen_common's
//                          MlirScalarBuilder, with libdevice's math)
//   lowering.cpp           NVVM, LLVM's NVPTX back end: the PTX text
#pragma once

#include <string>

#include "kernel_emission.h"
#include "kiln/codegen_common/diagnostics.h"
#include "kiln/cuda/codegen/ptx.h"

namespace mlir {
class MLIRContext;
}  // namespace mlir

namespace kiln::cuda::codegen::detail {

// ---- lowering.cpp

// The dialects the lowering makes ops of, the NVVM target and the translations to LLVM IR.
void register_lowering_dialects(mlir::DialectRegistry& registry);

// `module` (holding one gpu.module of kernels) lowered to PTX for options.chip, with
// `libdevice` linked. Throws kiln::Error with MLIR's diagnostics when a pass fails.
std::string lower_to_ptx(mlir::MLIRContext* ctx, mlir::ModuleOp module, const PtxOptions& options,
                         const std::string& libdevice, codegen_common::DiagnosticCollector& diags);

}  // namespace kiln::cuda::codegen::detail
