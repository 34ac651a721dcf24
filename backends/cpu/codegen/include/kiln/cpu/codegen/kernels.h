// Native CPU kernels for fusion groups, generated through MLIR and LLVM and JIT-compiled.
// A plain C++ interface: no MLIR or LLVM type crosses it, so only backends/cpu/codegen/
// pays the MLIR/LLVM header cost.
//
// Every generated kernel has one C signature (exec::FusedKernelFn, with the kernel specs in
// kiln/cpu/exec/kernel_spec.h), so executors call kernels of any arity through one function
// pointer type, and the same kernels can later be written to an object file for
// ahead-of-time export.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/ir/graph.h"

namespace kiln::cpu::codegen {

struct CodegenOptions {
  bool keep_ir = false;  // keep the generated MLIR (before lowering) for dumps and tests
  // Turn on the host's vector units (AVX2/FMA here) as detected at run time; off makes
  // portable scalar-ish code (for comparing against).
  bool host_cpu_features = true;
  // Position-independent machine code, which can be linked into a shared library
  // (link_shared_library) for ahead-of-time export. The JIT runs either kind.
  bool position_independent = false;
  // Where compiled modules are kept between processes (kiln/cpu/codegen/kernel_cache.h): a hit
  // skips the MLIR lowering and LLVM. Empty or "off": no cache. Callers that want the user's
  // cache pass default_cache_dir(). The cache never makes a compile fail: an unusable
  // directory or entry is reported in KernelModule::cache_note().
  std::string cache_dir;
};

// The user's kernel cache directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
// $HOME/.cache/kiln; "" (no cache) when KILN_CACHE_DIR is "off" or none of them is set.
std::string default_cache_dir();

struct CodegenTimings {
  double build_ms = 0;  // MLIR context and building the kernels' module
  double lower_ms = 0;  // the MLIR pass pipeline down to the LLVM dialect
  double llvm_ms = 0;   // translation to LLVM IR, LLVM -O3, machine code, writing the cache
  // Reading and checking a cache entry, and linking the machine code into the JIT (the only
  // cost of a cache hit besides build_ms).
  double load_ms = 0;
};

// The element types generated kernels compute in: float32, float64, int32, int64, bool. The
// cpu backend's fusion rules (what the fuse pass may group) ask this, so fusion and code
// generation cannot disagree.
bool supported_dtype(DType t);

// One JIT-compiled module holding every kernel of a graph (LLVM runs once per graph, or not
// at all on a cache hit).
class KernelModule {
 public:
  virtual ~KernelModule() = default;
  // The kernel named `name`; throws kiln::Error naming the kernels the module has.
  virtual exec::FusedKernelFn lookup(const std::string& name) const = 0;
  virtual const CodegenTimings& timings() const = 0;
  virtual const std::string& mlir_text() const = 0;  // empty unless keep_ir
  // The host CPU the code was generated for ("znver3 +avx2,+fma,...").
  virtual const std::string& target() const = 0;
  // The same in full, as LLVM names it: the target triple's architecture ("x86_64"), the
  // CPU ("znver3", "generic") and every enabled feature ("avx2", "fma", ...; no '+'). An
  // exported model records them so the runtime can refuse a CPU that lacks one.
  virtual const std::string& target_arch() const = 0;
  virtual const std::string& target_cpu() const = 0;
  virtual const std::vector<std::string>& target_features() const = 0;
  // True when the machine code came from CodegenOptions::cache_dir (nothing was lowered or
  // compiled).
  virtual bool from_cache() const = 0;
  // What the cache did: "cache hit <path>", "cache miss (written <path>)", "cache disabled",
  // "cache unwritable: <why>; ...", or a damaged entry that was recompiled and rewritten.
  virtual const std::string& cache_note() const = 0;
  // The module's machine code as a relocatable ELF object file (what the JIT linked).
  virtual const std::string& object() const = 0;
};

// Generates, lowers and JIT-compiles all `kernels` into one module. Throws kiln::Error with
// MLIR/LLVM's diagnostics (and the kernel and op involved) on failure. Supported element
// types: those of supported_dtype (the fusion pass fuses only these); an op
// without a scalar_body or another dtype is reported with the fix (leave it out of the group).
// With options.cache_dir, a module compiled before (by any process) is loaded from there.
std::unique_ptr<KernelModule> compile_kernels(std::span<const exec::FusedKernelSpec> kernels,
                                              const CodegenOptions& options = {});

// Links a module's object file (KernelModule::object() of a position_independent module)
// into the shared library `path`, with the system's C compiler driver ($CC, else cc) and
// libm. The library exports every kernel under its name; kiln::cpu::KernelLibrary loads it
// without MLIR or LLVM. `extra_inputs` are more files for the driver (an assembly file of
// data, say); with them `object` may be empty. Throws kiln::Error naming the compiler's
// output when linking fails.
void link_shared_library(const std::string& object, const std::string& path,
                         const std::vector<std::string>& extra_inputs = {});

}  // namespace kiln::cpu::codegen
