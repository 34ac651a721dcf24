// The driver: compile_ptx checks the specs, builds every kernel into one gpu.module (so LLVM
// runs once per graph), lowers it to PTX and says how each kernel is launched. The order of
// the stages (stages.h) and the timings read in one place.
#include <chrono>
#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "kiln/codegen_common/scalar_builder.h"
#include "kiln/codegen_common/spec_check.h"
#include "kiln/cuda/codegen/ptx.h"
#include "kiln/cuda/codegen/toolkit.h"
#include "kiln/error.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "stages.h"

namespace kiln::cuda::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

bool supported_dtype(DType t) { return codegen_common::supported_dtype(t); }

const FusedKernelInfo& PtxModule::kernel(const std::string& name) const {
  std::string names;
  for (const FusedKernelInfo& k : kernels) {
    if (k.name == name) return k;
    names += (names.empty() ? "" : ", ") + k.name;
  }
  KILN_FAIL("[cuda codegen] expected a kernel named '", name, "' in the PTX module, found only: ",
            names.empty() ? "none" : names, ". Fix: look up a name the specs gave.");
}

PtxModule compile_ptx(std::span<const cpu::exec::FusedKernelSpec> kernels,
                      const PtxOptions& options) {
  PtxModule result;
  result.chip = options.chip;
  std::set<std::string> unique_names;
  for (const cpu::exec::FusedKernelSpec& spec : kernels) {
    codegen_common::check_spec(spec, "cuda codegen");
    KILN_CHECK(unique_names.insert(spec.name).second,
               "[cuda codegen] expected unique kernel names, found '", spec.name,
               "' twice. Fix: number the kernels of a module (fused_0, fused_1, ...).");
    result.kernels.push_back({spec.name, spec.rows ? FusedKernelKind::Rows : FusedKernelKind::Elementwise,
                              spec.broadcast.size() + spec.output_per_row.size(),
                              spec.dims.size()});
  }
  KILN_CHECK(options.chip.rfind("sm_", 0) == 0 && options.chip.size() > 3, "[cuda codegen] "
             "expected a chip of the form sm_<compute capability> (sm_90 for H100/H200), found '",
             options.chip, "'. Fix: set PtxOptions::chip.");
  std::string libdevice = options.libdevice.empty() ? find_libdevice() : options.libdevice;
  KILN_CHECK(std::filesystem::is_regular_file(libdevice), "[cuda codegen] expected libdevice's "
             "bitcode at '", libdevice, "', found no such file. Fix: point PtxOptions::libdevice "
             "(or KILN_LIBDEVICE) at libdevice.10.bc of a CUDA toolkit.");

  Clock::time_point start = Clock::now();
  mlir::DialectRegistry registry;
  codegen_common::register_scalar_body_dialects(registry);
  detail::register_emission_dialects(registry);
  detail::register_lowering_dialects(registry);
  // No MLIR thread pool: kiln owns the only one.
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  codegen_common::DiagnosticCollector diags(&ctx);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::NameLoc::get(mlir::StringAttr::get(&ctx, "kiln.gpu_kernels")));
  (*module)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                     mlir::UnitAttr::get(&ctx));
  mlir::OpBuilder b(&ctx);
  b.setInsertionPointToEnd(module->getBody());
  auto gpu_module = b.create<mlir::gpu::GPUModuleOp>(module->getLoc(), "kiln_kernels");
  for (const cpu::exec::FusedKernelSpec& spec : kernels)
    detail::emit_kernel(*module, gpu_module.getBody(), spec);
  bool verified = mlir::succeeded(mlir::verify(*module));
  KILN_CHECK(verified, "[cuda codegen] expected the generated kernels to verify, got:\n",
             diags.take(),
             "Fix: this is a kiln bug in backends/cuda/codegen/src/kernel_emission.cpp, "
             "row_emission.cpp or backends/codegen_common/src/scalar_builder.cpp (or a "
             "scalar_body).");
  if (options.keep_ir) {
    llvm::raw_string_ostream os(result.mlir_text);
    module->print(os);
  }
  result.timings.build_ms = ms_since(start);

  start = Clock::now();
  result.ptx = detail::lower_to_ptx(&ctx, *module, options, libdevice, diags);
  result.timings.lower_ms = ms_since(start);
  return result;
}

}  // namespace kiln::cuda::codegen
