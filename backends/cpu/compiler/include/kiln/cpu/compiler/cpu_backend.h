// The compiled CPU backend: a traced graph goes through the pass pipeline, its fusion
// groups become native kernels (MLIR -> LLVM, one JIT module per graph), and the rest runs
// through the eager kernels (GEMM and convolution through their libraries).
//
//   cpu::CompiledGraph compiled(graph);           // passes + codegen, once
//   std::vector<Tensor> out = compiled.run(inputs);  // same convention as interp
//
// Gradients do not flow through generated kernels: compile() uses this backend for calls
// that need no gradient and the reference executor for the others (backends::choose_backend).
// Registered as the backend "cpu" (kiln/backends/backend.h) by register_backend().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/cpu/exec/graph_runner.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::cpu::codegen {
class KernelModule;
}

namespace kiln::cpu::compiler {

// What the fuse pass may group for generated CPU kernels: ops on cpu tensors of a dtype the
// code generator computes in (codegen::supported_dtype).
const passes::FusionRules& fusion_rules();

// Registers this compiler as the backend "cpu". Idempotent.
void register_backend();

struct CompilerOptions {
  std::string pipeline = passes::default_pipeline();
  bool verify_passes = false;  // ir::verify after every pass (tests; KILN_VERIFY_PASSES=1)
  std::string print_after;     // see passes::PipelineOptions
  std::function<void(std::string_view pass, const std::string& ir_text)> print_sink;
  // By graph input: the data of a Parameter or Buffer input to fold as a constant
  // (passes::PassContext::parameters_frozen), or undefined. The caller guards that the data
  // does not change (CompileOptions::freeze); unfolded uses still read the input per call.
  std::vector<Tensor> frozen_state;
  // Position-independent kernels, which kernel_module()->object() can link into a shared
  // library (ahead-of-time export).
  bool position_independent = false;
  // Kernels tuned for this host's CPU; false: for any CPU of the architecture (portable
  // exports).
  bool host_cpu_features = true;
};

struct CompileStats {
  passes::PassReport passes;
  int kernels = 0;      // generated kernels (fusion groups)
  int fused_ops = 0;    // ops inside them
  int other_nodes = 0;  // nodes run through eager kernels (library calls, views, ...)
  double codegen_build_ms = 0, codegen_lower_ms = 0, codegen_llvm_ms = 0;
  double codegen_load_ms = 0;  // loading the machine code (from the cache on a hit)
  double total_ms = 0;         // passes + codegen
  std::string target;          // the CPU the kernels were generated for
  bool planned = false;        // a pre-planned schedule; false: control flow, run node by node
  int epilogues = 0;       // fusion groups run block by block with the matmul or conv before them
  int packed_weights = 0;  // matmuls and convolutions by a model weight that keep it packed
  int image_chains = 0;    // runs of convolutions and poolings run block of images by block
  int frozen_parameters = 0;  // parameters (and buffers) whose data the passes could fold
  // What the kernel cache did ("cache hit <path>", "cache miss (written <path>)", ...; see
  // codegen::KernelModule::cache_note).
  std::string cache;
  // The planned executor's buffer sharing ("3 buffers, 1.5 MiB for 7 intermediates
  // (3.2 MiB unshared)"); re-planned per input size for graphs with symbolic sizes.
  std::string memory;
  // "passes 0.4 ms, codegen 62 ms (build 3, lower 9, llvm 50); 4 kernels (9 ops), 3 other
  // nodes; target znver3 +avx2,+fma; cache miss (written ...)"
  std::string str() const;
};

// The executable the backend "cpu" compiles a graph into: the passes and the generated
// kernels in front of a GraphRunner, which runs every call.
class CompiledGraph final : public exec::GraphRunner {
 public:
  explicit CompiledGraph(const ir::Graph& graph, const CompilerOptions& options = {});
  ~CompiledGraph() override;

  // run(inputs): one tensor per input of the graph given to the constructor, in order
  // (constants may be undefined); one per output. Several threads may call it at once: each
  // concurrent call runs on a plan of its own (built on first need, then kept), so calls
  // share no buffers. optimized_graph(): the graph after the passes (fusion groups as `fused`
  // nodes). weight_packs(), set_replay_recorded_random(): see GraphRunner.
  const CompileStats& stats() const { return stats_; }
  std::string summary() const override { return stats_.str(); }
  std::string pass_timings() const override { return stats_.passes.str(); }
  bool folded_frozen_state() const override { return stats_.frozen_parameters > 0; }
  // The generated kernels (named fused_kernel_name(i) for the i-th of fused_nodes() of the
  // optimized graph); null when the graph has no fusion group.
  const codegen::KernelModule* kernel_module() const { return module_.get(); }

 private:
  // What the passes and the code generator make, before the runner is built on it.
  struct Compiled;
  static Compiled compile(const ir::Graph& graph, const CompilerOptions& options);
  explicit CompiledGraph(Compiled compiled);

  std::unique_ptr<codegen::KernelModule> module_;
  CompileStats stats_;
};

}  // namespace kiln::cpu::compiler
