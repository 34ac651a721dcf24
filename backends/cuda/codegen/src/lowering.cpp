// Lowering: the kernels' gpu dialect module down to PTX text. NVVM target attached (the chip,
// LLVM's optimization level, libdevice linked for the math functions), the gpu.module's ops
// converted to the NVVM and LLVM dialects, then LLVM's NVPTX back end through
// gpu-module-to-binary, which leaves the PTX in a gpu.binary op. The pipeline is the one
// /work/shared/notes/mlir19.md records as working with MLIR 19. The only file of this
// generator that includes conversion passes and the translations to LLVM IR.
#include <string>

#include "kiln/error.h"
#include "stages.h"

// Per-conversion headers only (mlir/Conversion/Passes.h and InitAll*.h would triple the
// compile time of this file).
#include "llvm/ADT/StringRef.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

namespace kiln::cuda::codegen::detail {

void register_lowering_dialects(mlir::DialectRegistry& registry) {
  registry.insert<mlir::cf::ControlFlowDialect, mlir::NVVM::NVVMDialect>();
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
}

std::string lower_to_ptx(mlir::MLIRContext* ctx, mlir::ModuleOp module, const PtxOptions& options,
                         const std::string& libdevice, codegen_common::DiagnosticCollector& diags) {
  mlir::PassManager pm(ctx);
  mlir::GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = static_cast<unsigned>(options.opt_level);
  const std::string libraries[] = {libdevice};
  target.linkLibs = libraries;
  pm.addPass(mlir::createGpuNVVMAttachTarget(target));
  mlir::OpPassManager& kernels = pm.nest<mlir::gpu::GPUModuleOp>();
  kernels.addPass(mlir::createConvertSCFToCFPass());
  kernels.addPass(mlir::createConvertGpuOpsToNVVMOps());
  // What the NVVM conversion leaves (math.roundeven, say) becomes LLVM intrinsics, which the
  // NVPTX back end has instructions for.
  kernels.addPass(mlir::createConvertMathToLLVMPass());
  kernels.addPass(mlir::createCanonicalizerPass());
  kernels.addPass(mlir::createCSEPass());
  kernels.addPass(mlir::createReconcileUnrealizedCastsPass());
  mlir::GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";  // PTX text; "bin" would also run ptxas
  pm.addPass(mlir::createGpuModuleToBinaryPass(binary));
  bool ok = mlir::succeeded(pm.run(module));
  KILN_CHECK(ok, "[cuda codegen] expected the kernels to lower to PTX for ", options.chip,
             ", got MLIR errors:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cuda/codegen/src/lowering.cpp (or the kernel "
             "emission before it).");

  std::string ptx;
  module.walk([&](mlir::gpu::BinaryOp binary_op) {
    for (mlir::Attribute object : binary_op.getObjects())
      if (auto o = mlir::dyn_cast<mlir::gpu::ObjectAttr>(object)) ptx += o.getObject().getValue().str();
  });
  KILN_CHECK(!ptx.empty(), "[cuda codegen] expected gpu-module-to-binary to leave the PTX in a "
             "gpu.binary op, found none. Fix: this is a kiln bug in "
             "backends/cuda/codegen/src/lowering.cpp.");
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();  // the back end's C string's NUL
  return ptx;
}

}  // namespace kiln::cuda::codegen::detail
