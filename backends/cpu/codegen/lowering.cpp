// Lowering: the kernels' MLIR down to a relocatable object file. The math approximations and
// the MLIR pass pipeline to the LLVM dialect, translation to LLVM IR, LLVM -O3 and machine
// code for the target machine (target_machine.cpp). Separate from building the IR because
// this stage decides what machine code a given MLIR text becomes, which is what the kernel
// cache's key must describe (compiler_description, kCodegenRevision); it is also the only
// stage that includes the conversion passes and the translation to LLVM IR.
#include <memory>
#include <string>
#include <utility>

#include "kiln/error.h"
#include "stages.h"

// Per-conversion headers only: mlir/Conversion/Passes.h and InitAll*.h would triple the
// compile time of this file (see /work/shared/notes/mlir19.md).
#include "llvm/ADT/SmallVector.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/PatternMatch.h"
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

namespace kiln::cpu::codegen::detail {
namespace {

// Bump whenever a change in this folder alters the machine code of the same MLIR (the
// patterns and passes here, LLVM's options here and in target_machine.cpp, the JIT setup in
// jit.cpp): cached modules of another revision are then recompiled.
// 2: streaming stores for large outputs.
constexpr int kCodegenRevision = 2;

}  // namespace

void register_lowering_dialects(mlir::DialectRegistry& registry) {
  registry.insert<mlir::cf::ControlFlowDialect,
                  // the math approximations on the streaming loop's vectors make vector ops
                  mlir::vector::VectorDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);  // also inserts the LLVM dialect
}

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

void lower_to_llvm(mlir::MLIRContext* ctx, mlir::ModuleOp module, bool has_fma,
                   mlir::PassManager& pm, DiagnosticCollector& diags) {
  mlir::RewritePatternSet approximations(ctx);
  mlir::populateMathPolynomialApproximationPatterns(approximations);
  // The approximations emit math.fma, which without FMA hardware would become a libm call
  // per element: expand it to a multiply and an add there.
  if (!has_fma) mlir::populateExpandFmaFPattern(approximations);
  bool ok = mlir::succeeded(mlir::applyPatternsAndFoldGreedily(module, std::move(approximations)));
  KILN_CHECK(ok, "[codegen] expected the math approximations to converge, got:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cpu/codegen/lowering.cpp.");
  ok = mlir::succeeded(pm.run(module));
  KILN_CHECK(ok, "[codegen] expected the kernels to lower to the LLVM dialect, got MLIR errors:\n",
             diags.take(), "Fix: this is a kiln bug in backends/cpu/codegen/lowering.cpp.");
}

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

std::string emit_object(mlir::ModuleOp module, llvm::TargetMachine& tm,
                        DiagnosticCollector& diags) {
  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> llvm_module =
      mlir::translateModuleToLLVMIR(module, llvm_ctx, "kiln.kernels");
  KILN_CHECK(llvm_module != nullptr,
             "[codegen] expected the lowered kernels to translate to LLVM IR, got:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cpu/codegen/lowering.cpp.");
  llvm_module->setDataLayout(tm.createDataLayout());
  llvm_module->setTargetTriple(tm.getTargetTriple().getTriple());
  if (llvm::Error error =
          mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, &tm)(llvm_module.get()))
    KILN_FAIL(
        "[codegen] expected LLVM to optimize the kernels, got: ", llvm_error_text(std::move(error)),
        ". Fix: this is a kiln bug in backends/cpu/codegen/lowering.cpp.");
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

}  // namespace kiln::cpu::codegen::detail
