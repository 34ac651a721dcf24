// The code generator's stages and what they hand each other; private to backends/cpu/codegen
// (the public interface is kiln/cpu/codegen/kernels.h). MLIR and LLVM types are only declared
// here, so the stages that use neither (the spec checks) or only LLVM (target_machine.cpp,
// jit.cpp) never parse MLIR's headers, which cost tens of seconds per translation unit
// (/work/shared/notes/mlir19.md).
//
// compile_kernels (compile_kernels.cpp) runs them in this order:
//   (codegen_common)         each exec::FusedKernelSpec is checked before any MLIR is built
//   target_machine.cpp       the CPU LLVM compiles for (the JIT links for the same one)
//   loop_emission.cpp        each spec becomes a func.func of FusedKernelFn's signature: loops,
//   row_emission.cpp         loads and stores (a row kernel's reductions), around
//   (codegen_common)         the ops' scalar bodies as arith/math ops (scalar_builder.h)
//   lowering.cpp             MLIR passes to the LLVM dialect, LLVM -O3, a relocatable object
//   jit.cpp                  that object (or the kernel cache's) linked, its kernels resolved
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/codegen_common/diagnostics.h"
#include "kiln/codegen_common/spec_check.h"
#include "kiln/cpu/codegen/kernels.h"
#include "kiln/scalar_body.h"

namespace llvm {
class DataLayout;
class Error;
class TargetMachine;
namespace orc {
class JITTargetMachineBuilder;
class LLJIT;
}  // namespace orc
}  // namespace llvm

namespace mlir {
class DialectRegistry;
class MLIRContext;
class ModuleOp;
class PassManager;
}  // namespace mlir

namespace kiln::cpu::codegen::detail {

// Each spec is checked first (codegen_common::check_spec), so errors name the kernel.
using codegen_common::DiagnosticCollector;
using codegen_common::node_str;
using codegen_common::row_reduction_kind;

// ---- target_machine.cpp

void init_llvm_once();

std::string llvm_error_text(llvm::Error error);

// The host CPU with its features (or the process's generic CPU), at the highest code-gen
// level; the JIT is built from the same builder, so cached and fresh code match.
llvm::orc::JITTargetMachineBuilder target_builder(bool host_cpu_features);

std::unique_ptr<llvm::TargetMachine> make_target_machine(llvm::orc::JITTargetMachineBuilder& jtmb);

// "znver3 +avx2,+fma": the CPU and the vector features that matter for these kernels.
std::string describe_target(const llvm::TargetMachine& tm);

// Everything about the target the machine code depends on, for the cache key.
std::string full_target(const llvm::TargetMachine& tm);

// ---- MLIR: the dialects each stage makes ops of (codegen_common's scalar bodies too)

// Each stage inserts the dialects it creates ops of into the context's registry, so no
// translation unit includes a dialect it does not use.
void register_loop_dialects(mlir::DialectRegistry& registry);         // loop_emission.cpp
void register_lowering_dialects(mlir::DialectRegistry& registry);     // lowering.cpp

// ---- loop_emission.cpp

// Appends the kernel of `spec` to `module`: func.func @name(%buffers, %dims, %begin, %end).
// streaming_stores: the target can fence non-temporal stores (x86's sfence).
void emit_kernel(mlir::ModuleOp module, const exec::FusedKernelSpec& spec, bool streaming_stores);

// ---- lowering.cpp

// The MLIR passes from the scf/arith/math kernels to the LLVM dialect (after the math
// approximations, see lower_to_llvm). Built before lowering so the cache key can name them.
void add_lowering_passes(mlir::PassManager& pm);

// Math ops to arith code the loop vectorizer can vectorize (float32 only; the patterns
// leave float64 alone), then everything to the LLVM dialect through `pm`.
void lower_to_llvm(mlir::MLIRContext* ctx, mlir::ModuleOp module, bool has_fma,
                   mlir::PassManager& pm, DiagnosticCollector& diags);

// The code generator's part of the cache key: what turns the same MLIR into other machine
// code. kiln's version, and kCodegenRevision (lowering.cpp) for changes between versions.
std::string compiler_description(const mlir::PassManager& pm, bool has_fma,
                                 const CodegenOptions& options);

// LLVM IR, LLVM -O3 and the relocatable object file: what the JIT would compile on the first
// lookup, made explicitly so the very same bytes can go to the cache and to the JIT.
std::string emit_object(mlir::ModuleOp module, llvm::TargetMachine& tm, DiagnosticCollector& diags);

// ---- jit.cpp

// The module compile_kernels returns: its kernels' machine code, owned by an LLJIT.
class JitKernelModule final : public KernelModule {
 public:
  // Both out of line (jit.cpp), where LLJIT is a complete type.
  JitKernelModule();
  ~JitKernelModule() override;
  exec::FusedKernelFn lookup(const std::string& name) const override;
  const CodegenTimings& timings() const override { return timings_; }
  const std::string& mlir_text() const override { return mlir_text_; }
  const std::string& target() const override { return target_; }
  const std::string& target_arch() const override { return target_arch_; }
  const std::string& target_cpu() const override { return target_cpu_; }
  const std::vector<std::string>& target_features() const override { return target_features_; }
  bool from_cache() const override { return from_cache_; }
  const std::string& cache_note() const override { return cache_note_; }
  const std::string& object() const override { return object_; }

  std::unique_ptr<llvm::orc::LLJIT> jit;  // owns the kernels' machine code
  std::string object_;
  std::map<std::string, exec::FusedKernelFn> kernels_;
  CodegenTimings timings_;
  std::string mlir_text_;
  std::string target_;
  std::string target_arch_, target_cpu_;
  std::vector<std::string> target_features_;
  bool from_cache_ = false;
  std::string cache_note_;
};

// Links `object` into a fresh JIT and resolves every kernel in `names` into `module`: the one
// path of fresh compiles and cache hits. Returns "" or LLVM's error.
std::string link_object(JitKernelModule& module, std::string_view object,
                        const llvm::orc::JITTargetMachineBuilder& jtmb,
                        const llvm::DataLayout& layout, const std::vector<std::string>& names);

}  // namespace kiln::cpu::codegen::detail
