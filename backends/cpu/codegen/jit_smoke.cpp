// The MLIR/LLVM toolchain smoke test: builds axpy with the builder API, lowers it to the LLVM
// dialect, JIT-compiles it for the host and runs it (see kiln/cpu/codegen/smoke.h).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "kiln/cpu/codegen/smoke.h"
#include "kiln/error.h"

// Per-conversion headers only: mlir/Conversion/Passes.h and InitAll*.h would triple the
// compile time of this file (see /work/shared/notes/mlir19.md).
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

namespace kiln::cpu::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The C interface MLIR emits for `llvm.emit_c_interface`: memrefs are passed by pointer to
// their descriptor.
using AxpyFn = void (*)(float, StridedMemRefType<float, 1>*, StridedMemRefType<float, 1>*);

// LLVM's native-target setup and MLIR's pass registry are process-global: do both once.
// Only the passes the pipelines use are registered, so textual pipelines can name them
// without pulling in registerAllPasses().
void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    mlir::registerPass([] { return mlir::createCanonicalizerPass(); });
    mlir::registerPass([] { return mlir::createCSEPass(); });
    mlir::registerPass([] { return mlir::createConvertSCFToCFPass(); });
    mlir::registerPass([] { return mlir::createArithToLLVMConversionPass(); });
    mlir::registerPass([] { return mlir::createFinalizeMemRefToLLVMConversionPass(); });
    mlir::registerPass([] { return mlir::createConvertFuncToLLVMPass(); });
    mlir::registerPass([] { return mlir::createConvertControlFlowToLLVMPass(); });
    mlir::registerPass([] { return mlir::createReconcileUnrealizedCastsPass(); });
  });
}

const char* severity_name(mlir::DiagnosticSeverity severity) {
  switch (severity) {
    case mlir::DiagnosticSeverity::Error:
      return "error";
    case mlir::DiagnosticSeverity::Warning:
      return "warning";
    case mlir::DiagnosticSeverity::Note:
      return "note";
    case mlir::DiagnosticSeverity::Remark:
      return "remark";
  }
  return "diagnostic";
}

// Collects every MLIR diagnostic as text. The handler runs inside MLIR, which is built
// without exceptions, so it only appends; the caller throws at the kiln boundary.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* ctx)
      : handler_(ctx, [this](mlir::Diagnostic& diag) {
          append(diag);
          return mlir::success();
        }) {}

  DiagnosticCollector(const DiagnosticCollector&) = delete;
  DiagnosticCollector& operator=(const DiagnosticCollector&) = delete;

  std::string take() { return std::exchange(text_, std::string()); }

 private:
  void append(const mlir::Diagnostic& diag) {
    llvm::raw_string_ostream os(text_);
    os << "  " << diag.getLocation() << ": " << severity_name(diag.getSeverity()) << ": " << diag
       << "\n";
    for (const mlir::Diagnostic& note : diag.getNotes())
      os << "    " << note.getLocation() << ": note: " << note << "\n";
  }

  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

std::string llvm_error_text(llvm::Error error) {
  return llvm::toString(std::move(error));
}

std::string print_op(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

// func.func @axpy(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>): y[i] = a * x[i] + y[i].
mlir::OwningOpRef<mlir::ModuleOp> build_axpy(mlir::MLIRContext* ctx) {
  mlir::OpBuilder b(ctx);
  mlir::Location loc = mlir::NameLoc::get(b.getStringAttr("kiln.codegen.smoke.axpy"));
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);

  mlir::Type f32 = b.getF32Type();
  auto vector = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, f32);
  b.setInsertionPointToEnd(module->getBody());
  auto fn = b.create<mlir::func::FuncOp>(loc, "axpy", b.getFunctionType({f32, vector, vector}, {}));
  // Emits `_mlir_ciface_axpy`, which takes memref descriptors by pointer (a stable C ABI).
  // (mlir::LLVM::LLVMDialect::getEmitCWrapperAttrName(), spelled out to skip its header.)
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());

  mlir::Block* entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  mlir::Value a = entry->getArgument(0);
  mlir::Value x = entry->getArgument(1);
  mlir::Value y = entry->getArgument(2);
  mlir::Value zero = b.create<mlir::arith::ConstantIndexOp>(loc, 0);
  mlir::Value one = b.create<mlir::arith::ConstantIndexOp>(loc, 1);
  mlir::Value n = b.create<mlir::memref::DimOp>(loc, x, zero);
  b.create<mlir::scf::ForOp>(
      loc, zero, n, one, mlir::ValueRange{},
      [&](mlir::OpBuilder& lb, mlir::Location l, mlir::Value i, mlir::ValueRange) {
        mlir::Value xi = lb.create<mlir::memref::LoadOp>(l, x, mlir::ValueRange{i});
        mlir::Value yi = lb.create<mlir::memref::LoadOp>(l, y, mlir::ValueRange{i});
        mlir::Value ax = lb.create<mlir::arith::MulFOp>(l, a, xi);
        mlir::Value sum = lb.create<mlir::arith::AddFOp>(l, ax, yi);
        lb.create<mlir::memref::StoreOp>(l, sum, y, mlir::ValueRange{i});
        lb.create<mlir::scf::YieldOp>(l);
      });
  b.create<mlir::func::ReturnOp>(loc);
  return module;
}

// Parses an anchored pipeline and runs it on `module`. Parse errors go to a stream, not to
// the diagnostic engine, so both are reported (a malformed pass *option* value is the
// exception: LLVM's option parser prints that detail to stderr).
void lower(mlir::MLIRContext* ctx, mlir::ModuleOp module, const std::string& pipeline,
           DiagnosticCollector& diags) {
  std::string parse_errors;
  llvm::raw_string_ostream parse_os(parse_errors);
  // The FailureOr overload keeps the `builtin.module(...)` anchor; the (text, pm) overload
  // would silently nest a pass manager that never runs.
  mlir::FailureOr<mlir::OpPassManager> parsed = mlir::parsePassPipeline(pipeline, parse_os);
  KILN_CHECK(mlir::succeeded(parsed), "[codegen.smoke] expected a valid MLIR pass pipeline, got '",
             pipeline, "': ", parse_errors, diags.take(),
             "\nFix: anchor it as 'builtin.module(pass, ...)' and use passes registered in "
             "jit_smoke.cpp (default: '",
             default_smoke_pipeline(), "').");

  mlir::PassManager pm(ctx);
  static_cast<mlir::OpPassManager&>(pm) = std::move(*parsed);
  bool ok = mlir::succeeded(pm.run(module));
  KILN_CHECK(ok, "[codegen.smoke] expected pipeline '", pipeline,
             "' to lower axpy to the LLVM dialect, got MLIR errors:\n", diags.take(),
             "Fix: check the pass order against default_smoke_pipeline().");
}

}  // namespace

std::string default_smoke_pipeline() {
  return "builtin.module(canonicalize, cse, convert-scf-to-cf, convert-arith-to-llvm, "
         "finalize-memref-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, "
         "reconcile-unrealized-casts)";
}

SmokeResult run_jit_smoke(float a, std::span<const float> x, std::span<const float> y,
                          const SmokeOptions& options) {
  KILN_CHECK(x.size() == y.size(), "[codegen.smoke] expected x and y of the same size, got ",
             x.size(), " and ", y.size(), ". Fix: pass vectors of equal length.");
  init_llvm_once();
  SmokeResult result;

  Clock::time_point start = Clock::now();
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::memref::MemRefDialect, mlir::scf::SCFDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  // Also inserts the LLVM dialect: including LLVMDialect.h here would add ~6 s (of ~13 s) to
  // this file's compile time.
  mlir::registerLLVMDialectTranslation(registry);
  // No MLIR thread pool: kiln owns the only one, and this module is tiny.
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  // Diagnostics name the failing op already; a generic dump of the enclosing function in
  // every kiln::Error is noise (SmokeOptions::keep_ir gives the IR).
  ctx.printOpOnDiagnostic(false);
  DiagnosticCollector diags(&ctx);
  result.timings.context_ms = ms_since(start);

  start = Clock::now();
  mlir::OwningOpRef<mlir::ModuleOp> module = build_axpy(&ctx);
  bool verified = mlir::succeeded(mlir::verify(*module));
  KILN_CHECK(verified, "[codegen.smoke] expected the built axpy module to verify, got:\n",
             diags.take(), "Fix: this is a kiln bug in build_axpy().");
  result.timings.build_ms = ms_since(start);
  if (options.keep_ir) result.input_ir = print_op(*module);

  start = Clock::now();
  lower(&ctx, *module, options.pipeline.empty() ? default_smoke_pipeline() : options.pipeline,
        diags);
  result.timings.lower_ms = ms_since(start);
  if (options.keep_ir) result.lowered_ir = print_op(*module);

  start = Clock::now();
  // A host TargetMachine gives LLVM's vectorizer a cost model (about 2x on fused kernels).
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> jtmb =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  KILN_CHECK(bool(jtmb), "[codegen.smoke] expected LLVM to detect the host CPU, got: ",
             llvm_error_text(jtmb.takeError()), ". Fix: check that LLVM supports this host.");
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm = jtmb->createTargetMachine();
  KILN_CHECK(bool(tm), "[codegen.smoke] expected an LLVM TargetMachine for the host, got: ",
             llvm_error_text(tm.takeError()), ". Fix: check that LLVM supports this host.");
  // `transformer` is a function_ref in ExecutionEngineOptions: keep the callable alive here.
  std::function<llvm::Error(llvm::Module*)> optimize =
      mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, tm->get());
  mlir::ExecutionEngineOptions engine_options;
  engine_options.transformer = optimize;
  engine_options.enableGDBNotificationListener = false;
  engine_options.enablePerfNotificationListener = false;
  llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>> engine =
      mlir::ExecutionEngine::create(*module, engine_options, std::move(*tm));
  if (!engine) {
    std::string error = llvm_error_text(engine.takeError());
    KILN_FAIL("[codegen.smoke] expected the lowered module to translate to LLVM IR and JIT, got: ",
              error, "\n", diags.take(),
              "Fix: the pipeline must lower every op to the LLVM dialect (see "
              "default_smoke_pipeline()).");
  }
  // Machine code is generated lazily, on the first lookup.
  llvm::Expected<void*> symbol = (*engine)->lookup("_mlir_ciface_axpy");
  KILN_CHECK(bool(symbol), "[codegen.smoke] expected the JIT to define _mlir_ciface_axpy, got: ",
             llvm_error_text(symbol.takeError()),
             ". Fix: keep the llvm.emit_c_interface attribute on @axpy.");
  auto axpy = reinterpret_cast<AxpyFn>(*symbol);
  result.timings.jit_ms = ms_since(start);

  std::vector<float> x_copy(x.begin(), x.end());
  result.y.assign(y.begin(), y.end());
  auto n = static_cast<int64_t>(x.size());
  StridedMemRefType<float, 1> x_desc{x_copy.data(), x_copy.data(), 0, {n}, {1}};
  StridedMemRefType<float, 1> y_desc{result.y.data(), result.y.data(), 0, {n}, {1}};
  start = Clock::now();
  axpy(a, &x_desc, &y_desc);
  result.timings.run_ms = ms_since(start);
  return result;
}

}  // namespace kiln::cpu::codegen
