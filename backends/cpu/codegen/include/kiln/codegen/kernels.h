// Native CPU kernels for fusion groups, generated through MLIR and LLVM and JIT-compiled.
// A plain C++ interface: no MLIR or LLVM type crosses it, so only backends/cpu/codegen/
// pays the MLIR/LLVM header cost.
//
// Every generated kernel has one C signature (KernelFn), so executors call kernels of any
// arity through one function pointer type, and the same kernels can later be written to
// an object file for ahead-of-time export.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::codegen {

// buffers: one data pointer per region input (in order), then one per region output.
// dims:    the runtime size of every iteration dim (FusedKernelSpec::dims, static
//          ones included).
// [begin, end): the part of iteration dim 0 to compute, so callers can split the work
//          across threads (0, dims[0]) computes everything.
// An output may be exactly an input's buffer but must not partially overlap one (there are
// no runtime overlap checks). Outputs of 16 MiB or more that start on a 64-byte boundary are
// written with streaming (non-temporal) stores, fenced before the kernel returns.
using KernelFn = void (*)(void* const* buffers, const int64_t* dims, int64_t begin, int64_t end);

// A fusion group, ready for code generation.
//
// The iteration space is the group's iteration shape (fused_iteration_shape) with size-1
// dims dropped and adjacent dims merged where every input broadcasts alike
// (fused_kernel_spec() does this). Each input is a dense row-major array over the iteration
// dims it does not broadcast along; each output is a dense row-major array over all
// iteration dims, except a row kernel's per-row outputs, which have no last dim. Bool
// elements are one byte (0 or 1).
//
// A row kernel (`rows`) reduces the last iteration dim: it is never merged, and there is
// always a dim of rows before it. Per row it runs one loop over the last dim for each
// reduction (computing the reduction's operand from the inputs on the way), then one loop
// that writes the per-element outputs; values that depend only on the row (a max, a mean)
// are computed once per row between the loops.
struct FusedKernelSpec {
  std::string name;  // the kernel's symbol, unique in its module ("fused_0")
  // The fusion group's region: its inputs feed the nodes, every node is an Elementwise op
  // with a scalar_body (or in a row kernel a float sum/amax/amin over the last dim with
  // keepdim), and its outputs are the kernel's outputs. Not owned.
  const ir::Graph* region = nullptr;
  std::vector<int64_t> dims;  // the size of each iteration dim; -1 where known only at run time
  // broadcast[i][d]: region input i is broadcast along iteration dim d (it has one element
  // there, read for every index).
  std::vector<std::vector<bool>> broadcast;
  bool rows = false;  // a row kernel
  // output_per_row[o]: region output o holds one value per row (a row kernel's statistics).
  std::vector<bool> output_per_row;
};

// The spec of a `fused` node of kind "elementwise" or "row": iteration dims from its
// iteration shape (symbolic sizes become -1; fused_dim_groups tells callers which dims of
// that shape each one merges). Throws kiln::Error when an elementwise group's outputs do
// not share one shape, or a row group's outputs are neither its shape nor its row shape.
FusedKernelSpec fused_kernel_spec(const ir::Node& fused_node, std::string name);
// What the group iterates over: an elementwise group's output shape; for a row group the
// shape its reductions reduce along the last dim (symbolic sizes as in the IR).
Shape fused_iteration_shape(const ir::Node& fused_node);
// For each iteration dim of fused_kernel_spec(node), the dims of fused_iteration_shape it
// merges (size-1 dims are dropped; a rank-0 shape gives one dim of size 1 that merges none,
// as does a row kernel's single row).
std::vector<std::vector<int>> fused_dim_groups(const ir::Node& fused_node);

struct CodegenOptions {
  bool keep_ir = false;  // keep the generated MLIR (before lowering) for dumps and tests
  // Turn on the host's vector units (AVX2/FMA here) as detected at run time; off makes
  // portable scalar-ish code (for comparing against).
  bool host_cpu_features = true;
  // Where compiled modules are kept between processes (kiln/codegen/kernel_cache.h): a hit
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

// One JIT-compiled module holding every kernel of a graph (LLVM runs once per graph, or not
// at all on a cache hit).
class KernelModule {
 public:
  virtual ~KernelModule() = default;
  // The kernel named `name`; throws kiln::Error naming the kernels the module has.
  virtual KernelFn lookup(const std::string& name) const = 0;
  virtual const CodegenTimings& timings() const = 0;
  virtual const std::string& mlir_text() const = 0;  // empty unless keep_ir
  // The host CPU the code was generated for ("znver3 +avx2,+fma,...").
  virtual const std::string& target() const = 0;
  // True when the machine code came from CodegenOptions::cache_dir (nothing was lowered or
  // compiled).
  virtual bool from_cache() const = 0;
  // What the cache did: "cache hit <path>", "cache miss (written <path>)", "cache disabled",
  // "cache unwritable: <why>; ...", or a damaged entry that was recompiled and rewritten.
  virtual const std::string& cache_note() const = 0;
};

// Generates, lowers and JIT-compiles all `kernels` into one module. Throws kiln::Error with
// MLIR/LLVM's diagnostics (and the kernel and op involved) on failure. Supported element
// types: float32, float64, int32, int64, bool (the fusion pass fuses only these); an op
// without a scalar_body or another dtype is reported with the fix (leave it out of the group).
// With options.cache_dir, a module compiled before (by any process) is loaded from there.
std::unique_ptr<KernelModule> compile_kernels(std::span<const FusedKernelSpec> kernels,
                                              const CodegenOptions& options = {});

}  // namespace kiln::codegen
