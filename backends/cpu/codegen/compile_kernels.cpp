// The driver: compile_kernels runs the stages (stages.h) over all kernels of a graph in
// one MLIR module, and uses the on-disk kernel cache (kernel_cache.h): the key hashes the
// module's MLIR, the target and the compiler description, and a hit skips lowering and LLVM.
// Separate from the stages so the order of the stages, the timings and the cache's notes
// read in one place; it needs only MLIR's IR and pass-manager headers, no dialect.
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/codegen_common/scalar_builder.h"
#include "kiln/cpu/codegen/kernel_cache.h"
#include "kiln/error.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/DataLayout.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "stages.h"

namespace kiln::cpu::codegen {

bool supported_dtype(DType t) { return codegen_common::supported_dtype(t); }

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string print_op(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

}  // namespace

std::unique_ptr<KernelModule> compile_kernels(std::span<const exec::FusedKernelSpec> kernels,
                                              const CodegenOptions& options) {
  std::set<std::string> unique_names;
  std::vector<std::string> names;
  for (const exec::FusedKernelSpec& spec : kernels) {
    codegen_common::check_spec(spec, "codegen");
    KILN_CHECK(unique_names.insert(spec.name).second,
               "[codegen] expected unique kernel names, found '", spec.name,
               "' twice. Fix: number the kernels of a module (fused_0, fused_1, ...).");
    names.push_back(spec.name);
  }
  detail::init_llvm_once();
  auto result = std::make_unique<detail::JitKernelModule>();

  Clock::time_point start = Clock::now();
  mlir::DialectRegistry registry;
  codegen_common::register_scalar_body_dialects(registry);
  detail::register_loop_dialects(registry);
  detail::register_lowering_dialects(registry);
  // No MLIR thread pool: kiln owns the only one.
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  ctx.printOpOnDiagnostic(false);
  detail::DiagnosticCollector diags(&ctx);

  llvm::orc::JITTargetMachineBuilder jtmb = detail::target_builder(options.host_cpu_features);
  if (options.position_independent) jtmb.setRelocationModel(llvm::Reloc::PIC_);
  std::unique_ptr<llvm::TargetMachine> tm = detail::make_target_machine(jtmb);
  const llvm::DataLayout layout = tm->createDataLayout();

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::NameLoc::get(mlir::StringAttr::get(&ctx, "kiln.kernels")));
  // Streaming stores only where the kernel can fence them (x86's sfence).
  const bool streaming_stores = tm->getTargetTriple().isX86();
  for (const exec::FusedKernelSpec& spec : kernels)
    detail::emit_kernel(*module, spec, streaming_stores);
  bool verified = mlir::succeeded(mlir::verify(*module));
  KILN_CHECK(
      verified, "[codegen] expected the generated kernels to verify, got:\n", diags.take(),
      "Fix: this is a kiln bug in backends/cpu/codegen/loop_emission.cpp, row_emission.cpp or "
      "backends/codegen_common/src/scalar_builder.cpp (or a scalar_body).");
  result->target_ = detail::describe_target(*tm);
  result->target_arch_ = tm->getTargetTriple().getArchName().str();
  result->target_cpu_ = tm->getTargetCPU().empty() ? "generic" : tm->getTargetCPU().str();
  llvm::SmallVector<llvm::StringRef> features;
  tm->getTargetFeatureString().split(features, ',');
  for (llvm::StringRef f : features)
    if (f.consume_front("+")) result->target_features_.push_back(f.str());
  bool has_fma = result->target_.find("+fma") != std::string::npos;
  mlir::PassManager pm(&ctx);
  detail::add_lowering_passes(pm);

  // The key hashes the MLIR text: building it costs ~1-2 ms, the LLVM part it saves ~20-50.
  KernelCache cache(options.cache_dir);
  std::string key;
  if (options.keep_ir || cache.enabled()) {
    std::string text = print_op(*module);
    if (cache.enabled())
      key = kernel_cache_key(
          {text, detail::full_target(*tm), detail::compiler_description(pm, has_fma, options)});
    if (options.keep_ir) result->mlir_text_ = std::move(text);
  }
  result->timings_.build_ms = ms_since(start);

  std::string unusable;  // why an existing entry was not used
  if (cache.enabled()) {
    start = Clock::now();
    std::optional<KernelCacheEntry> entry = cache.load(key, unusable);
    if (entry && entry->kernels != names) unusable = "it defines other kernels";
    if (entry && unusable.empty()) {
      unusable = detail::link_object(*result, entry->object, jtmb, layout, names);
      if (!unusable.empty()) unusable = "the JIT cannot link it: " + unusable;
    }
    result->timings_.load_ms = ms_since(start);
    if (entry && unusable.empty()) {
      result->from_cache_ = true;
      result->cache_note_ = "cache hit " + cache.path(key);
      result->object_ = std::move(entry->object);
      return result;
    }
  }

  start = Clock::now();
  detail::lower_to_llvm(&ctx, *module, has_fma, pm, diags);
  result->timings_.lower_ms = ms_since(start);

  start = Clock::now();
  std::string object = detail::emit_object(*module, *tm, diags);
  if (!cache.enabled()) {
    result->cache_note_ = cache.note();
  } else {
    std::string failed = cache.store(key, {object, names});
    std::string path = cache.path(key);
    if (!failed.empty())
      result->cache_note_ = "cache unwritable: " + failed + "; compiled without caching";
    else if (!unusable.empty())
      result->cache_note_ =
          "cache entry " + path + " unusable (" + unusable + "): recompiled and rewritten";
    else
      result->cache_note_ = "cache miss (written " + path + ")";
    if (failed.empty())
      if (int evicted = cache.evict(key))
        result->cache_note_ += "; evicted " + std::to_string(evicted) +
                               " least recently used entries (limit KILN_CACHE_MAX_MB)";
  }
  result->timings_.llvm_ms = ms_since(start);

  start = Clock::now();
  std::string error = detail::link_object(*result, object, jtmb, layout, names);
  KILN_CHECK(error.empty(), "[codegen] expected the JIT to link the compiled kernels, got: ", error,
             ". Fix: this is a kiln bug in backends/cpu/codegen/jit.cpp.");
  result->timings_.load_ms += ms_since(start);
  result->object_ = std::move(object);
  return result;
}

}  // namespace kiln::cpu::codegen
