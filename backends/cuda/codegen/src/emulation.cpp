// The emulated kernels (emulation.h): the KernelEmitter's CPU form of each kernel, lowered to
// the LLVM dialect with the CPU passes (math functions without an LLVM intrinsic call libm),
// and JIT-compiled by MLIR's ExecutionEngine, whose packed wrappers take every argument as a
// pointer.
#include "kiln/cuda/codegen/emulation.h"

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernel_emission.h"
#include "kiln/codegen_common/diagnostics.h"
#include "kiln/codegen_common/scalar_builder.h"
#include "kiln/codegen_common/spec_check.h"
#include "kiln/error.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

namespace kiln::cuda::codegen {
namespace {

class JitEmulatedKernels final : public EmulatedKernels {
 public:
  void run(const std::string& name, std::span<void* const> buffers, std::span<const int64_t> dims,
           int64_t blocks) const override {
    auto it = arity_.find(name);
    KILN_CHECK(it != arity_.end(), "[cuda codegen] expected an emulated kernel named '", name,
               "'. Fix: run a kernel of the specs given to emulate_on_cpu.");
    KILN_CHECK(buffers.size() == it->second.first && dims.size() == it->second.second,
               "[cuda codegen] emulated kernel '", name, "': expected ", it->second.first,
               " buffers and ", it->second.second, " dims, found ", buffers.size(), " and ",
               dims.size(), ". Fix: pass the spec's inputs, then its outputs, and every dim.");
    KILN_CHECK(blocks >= 1, "[cuda codegen] emulated kernel '", name,
               "': expected at least one block, found ", blocks, ".");
    // The packed wrapper takes a pointer to each argument.
    std::vector<void*> pointers(buffers.begin(), buffers.end());
    std::vector<int64_t> scalars(dims.begin(), dims.end());
    scalars.push_back(0);
    scalars.push_back(blocks);
    std::vector<void*> args;
    for (void*& p : pointers) args.push_back(&p);
    for (int64_t& s : scalars) args.push_back(&s);
    for (int64_t block = 0; block < blocks; ++block) {
      scalars[scalars.size() - 2] = block;
      llvm::Error error = engine->invokePacked(name, args);
      KILN_CHECK(!error, "[cuda codegen] expected to run emulated kernel '", name, "', got: ",
                 llvm::toString(std::move(error)), ".");
    }
  }

  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::map<std::string, std::pair<size_t, size_t>> arity_;  // buffers, dims
};

}  // namespace

std::unique_ptr<EmulatedKernels> emulate_on_cpu(std::span<const cpu::exec::FusedKernelSpec> kernels) {
  auto result = std::make_unique<JitEmulatedKernels>();
  for (const cpu::exec::FusedKernelSpec& spec : kernels) {
    codegen_common::check_spec(spec, "cuda codegen");
    KILN_CHECK(result->arity_
                   .emplace(spec.name, std::pair{spec.broadcast.size() + spec.output_per_row.size(),
                                                 spec.dims.size()})
                   .second,
               "[cuda codegen] expected unique kernel names, found '", spec.name, "' twice.");
  }
  static const bool native = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)native;

  mlir::DialectRegistry registry;
  codegen_common::register_scalar_body_dialects(registry);
  detail::register_emission_dialects(registry);
  registry.insert<mlir::cf::ControlFlowDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  codegen_common::DiagnosticCollector diags(&ctx);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::NameLoc::get(mlir::StringAttr::get(&ctx, "kiln.emulated")));
  for (const cpu::exec::FusedKernelSpec& spec : kernels) detail::emit_emulated_kernel(*module, spec);
  KILN_CHECK(mlir::succeeded(mlir::verify(*module)),
             "[cuda codegen] expected the emulated kernels to verify, got:\n", diags.take(),
             "Fix: this is a kiln bug in backends/cuda/codegen/src/kernel_emission.cpp.");

  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::createConvertSCFToCFPass());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createConvertMathToLibmPass());  // erf, tanh, log1p, ...: libm
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  KILN_CHECK(mlir::succeeded(pm.run(*module)),
             "[cuda codegen] expected the emulated kernels to lower to the LLVM dialect, got:\n",
             diags.take(), "Fix: this is a kiln bug in backends/cuda/codegen/src/emulation.cpp.");

  mlir::ExecutionEngineOptions options;
  options.transformer = mlir::makeOptimizingTransformer(/*optLevel=*/1, /*sizeLevel=*/0, nullptr);
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine)
    KILN_FAIL("[cuda codegen] expected the JIT to compile the emulated kernels, got: ",
              llvm::toString(engine.takeError()), diags.take(),
              ". Fix: this is a kiln bug in backends/cuda/codegen/src/emulation.cpp.");
  result->engine = std::move(*engine);
  return result;
}

}  // namespace kiln::cuda::codegen
