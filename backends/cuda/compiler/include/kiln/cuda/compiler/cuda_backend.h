// The compiled GPU backend: a traced graph goes through the pass pipeline with the GPU's
// fusion rules, its fusion groups become one PTX module (kiln/cuda/codegen/ptx.h: MLIR gpu
// dialect -> NVVM -> PTX) loaded on the graph's GPU, and the rest runs through the eager CUDA
// kernels (matmuls through cuBLASLt), all queued on the current stream.
//
//   cuda::compiler::CompiledGraph compiled(graph);     // passes + PTX + load, once
//   std::vector<Tensor> out = compiled.run(inputs);   // same convention as interp
//
// Gradients do not flow through generated kernels: compile() uses this backend for calls
// that need no gradient and the reference executor for the others (backends::choose_backend).
// Registered as the backend "cuda" (kiln/backends/backend.h) by register_backend(); compile()
// picks it for GPU tensors when CompileOptions::backend is empty.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/cuda/codegen/ptx.h"
#include "kiln/cuda/exec/graph_runner.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pass_manager.h"

namespace kiln::cuda::compiler {

// What the fuse pass may group for generated GPU kernels: ops on GPU tensors, and the host
// scalars next to them (the 2 of `x * 2`; the compiler moves those constants to the GPU), of
// a dtype the code generator computes in (codegen::supported_dtype).
const passes::FusionRules& fusion_rules();

// Why the backend cannot run `graph`, or nothing: every value must be on one GPU, except
// 0-d host scalars fed to it.
std::optional<std::string> refusal(const ir::Graph& graph);

// Registers this compiler as the backend "cuda". Idempotent.
void register_backend();

// How a compiled graph's kernels reach its GPU: from the PTX module and the specs it was
// generated from, the function that launches them. driver_loader() loads the PTX through the
// driver (FusedKernelModule); tests without a GPU run the same kernels emulated.
using KernelLoader = std::function<exec::FusedLauncher(
    const codegen::PtxModule& module, std::span<const cpu::exec::FusedKernelSpec> specs,
    Device device)>;
KernelLoader driver_loader();

struct CompilerOptions {
  std::string pipeline = passes::default_pipeline();
  bool verify_passes = false;  // ir::verify after every pass (tests; KILN_VERIFY_PASSES=1)
  std::string print_after;     // see passes::PipelineOptions
  std::function<void(std::string_view pass, const std::string& ir_text)> print_sink;
  // By graph input: the data of a Parameter or Buffer input to fold as a constant, or
  // undefined (see cpu::compiler::CompilerOptions::frozen_state).
  std::vector<Tensor> frozen_state;
  // PtxOptions::chip empty: the graph's GPU's architecture, sm_90 for newer ones (the driver
  // compiles sm_90 PTX for them) and where the device cannot be asked.
  codegen::PtxOptions ptx{.chip = ""};
  KernelLoader load;  // empty: driver_loader()
};

struct CompileStats {
  passes::PassReport passes;
  int kernels = 0;          // generated kernels (fusion groups)
  int fused_ops = 0;        // ops inside them
  int gemm_epilogues = 0;   // matmuls whose bias and activation cuBLASLt applies
  int other_nodes = 0;      // nodes run through eager kernels (cuBLASLt, views, ...)
  int host_scalars = 0;     // 0-d host constants read by a group, moved to the GPU
  int frozen_parameters = 0;
  double ptx_build_ms = 0, ptx_lower_ms = 0;
  double load_ms = 0;   // loading the module on the GPU
  double total_ms = 0;  // passes + PTX + load
  std::string chip;     // what the PTX targets ("sm_90"); empty without groups
  // "passes 0.4 ms, ptx 62 ms (build 3, lower 59), load 1 ms; 4 kernels (9 ops), 2 GEMM
  // epilogues, 3 other nodes; sm_90"
  std::string str() const;
};

// The executable the backend "cuda" compiles a graph into: the passes and the PTX module in
// front of an exec::GraphRunner, which runs every call.
class CompiledGraph final : public exec::GraphRunner {
 public:
  explicit CompiledGraph(const ir::Graph& graph, const CompilerOptions& options = {});
  ~CompiledGraph() override;

  const CompileStats& stats() const { return stats_; }
  // The compile stats, then what the latest call launched (GraphRunner::launch_summary).
  std::string summary() const override;
  std::string pass_timings() const override { return stats_.passes.str(); }
  bool folded_frozen_state() const override { return stats_.frozen_parameters > 0; }
  // The generated kernels (named cpu::exec::fused_kernel_name(i) for the i-th of
  // cpu::exec::fused_nodes() of the optimized graph); empty PTX without fusion groups.
  const codegen::PtxModule& ptx() const { return ptx_; }

 private:
  struct Compiled;
  static Compiled compile(const ir::Graph& graph, const CompilerOptions& options);
  explicit CompiledGraph(Compiled compiled);

  codegen::PtxModule ptx_;
  CompileStats stats_;
};

// The backend "cuda" under another name and with another loader (tests run its kernels
// emulated on a fake driver). Register it with backends::register_backend.
std::unique_ptr<backends::Backend> make_backend(std::string name, KernelLoader load);

}  // namespace kiln::cuda::compiler
