// Runs a graph whose fusion groups (`fused` nodes) have GPU kernels: the reference executor's
// node loop (interp.h) runs every other node through the eager CUDA kernels, and each group
// becomes one launch of its generated kernel on the current stream. The compiled backend
// "cuda" runs its graphs here; so can a program that loads kernels made elsewhere, since
// nothing here needs the code generator. A graph without control flow runs as a fixed
// schedule whose intermediates share one device arena per call (device_plan.h). Repeated
// calls are replayed as CUDA graphs (graph_replay.h) unless set_graph_replay(false) or
// KILN_CUDA_GRAPHS=0 turns that off.
//
//   GraphRunner runner(graph, [&](const std::string& name, std::span<void* const> buffers,
//                                 std::span<const int64_t> dims) {
//     module.launch(name, buffers, dims);  // a kiln::cuda::FusedKernelModule
//   });
//   std::vector<Tensor> out = runner.run(inputs);  // queued on the stream; results on the GPU
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/cuda/exec/device_plan.h"
#include "kiln/cuda/exec/gemm_epilogue.h"
#include "kiln/cuda/exec/graph_replay.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/ir/graph.h"

namespace kiln::interp {
class Executable;
}

namespace kiln::cuda::exec {

// Queues generated kernel `name` (cpu::exec::fused_kernel_name of its group's index) over
// iteration dims `dims`; `buffers`: device pointers of the group's inputs, then its outputs
// (kiln/cuda/fused_kernels.h has the layout). FusedKernelModule::launch is one.
using FusedLauncher = std::function<void(const std::string& name, std::span<void* const> buffers,
                                         std::span<const int64_t> dims)>;

// How to launch the kernel of each fusion group of `graph` (cpu::exec::fused_nodes order):
// what cuda::codegen::compile_ptx reports for the graph's groups, derived from the graph alone,
// so a program that loads PTX made elsewhere (kiln_rt) knows its kernels.
std::vector<FusedKernelInfo> fused_kernel_infos(const ir::Graph& graph);

class GraphRunner : public backends::Executable {
 public:
  // `caller_inputs`: how many inputs callers may pass instead of all of the graph's (the
  // passes may have appended constants a caller does not know about); 0: all of them.
  GraphRunner(std::shared_ptr<const ir::Graph> graph, FusedLauncher launch,
              size_t caller_inputs = 0);
  ~GraphRunner() override;
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // One tensor per graph input (or the first `caller_inputs`), in order; inputs left out or
  // undefined are read from the graph: a constant whose data is on another device than its
  // type names (the compiler places host scalars on the GPU; compiling needs no GPU) is
  // copied there once, on the first run. Returns when the work is queued. Thread-safe.
  std::vector<Tensor> run(std::span<const Tensor> inputs) override;
  bool runs_concurrently() const override { return true; }
  const ir::Graph& optimized_graph() const override { return *graph_; }
  std::string summary() const override { return ""; }
  std::string pass_timings() const override { return ""; }
  // Random ops replay the positions their attributes hold (segments, see interp.h). Set it
  // before the first run.
  void set_replay_recorded_random(bool replay);
  // Replays repeated calls as CUDA graphs (on unless KILN_CUDA_GRAPHS=0). Set it before the
  // first run.
  void set_graph_replay(bool on);
  // Runs the graph through its device plan (when it has no control flow), else op by op
  // through the reference executor's node loop, each result allocated on its own. On unless
  // set off; set it before the first run.
  void set_device_plan(bool on);
  bool uses_device_plan() const { return plan_ != nullptr; }
  // What the latest uncaptured run queued, where its intermediates lived and how calls are
  // replayed: "9 launches per call (3 generated kernels, 4 eager kernels, 2 library calls);
  // intermediates in one device arena: 3 buffers, ...; replayed as a CUDA graph (...)"
  // (DevicePlan::memory_summary, GraphReplay::summary); empty before the first run.
  std::string launch_summary() const;
  // How many calls were CUDA graph replays.
  uint64_t graph_replays() const { return replay_ ? replay_->replays() : 0; }

  // A fusion group's kernel and how its iteration dims follow from the group's shape.
  struct Group {
    std::string kernel;
    Shape iteration;                           // cpu::exec::fused_iteration_shape
    std::vector<std::vector<int>> dim_groups;  // cpu::exec::fused_dim_groups
  };

 private:
  // One call through the node loop (uncaptured, or being captured).
  std::vector<Tensor> run_nodes(std::span<const Tensor> inputs);
  void run_group(const ir::Node& node, std::span<const Tensor> operands,
                 std::span<const int64_t> symbols, std::span<Tensor> results) const;
  // A "gemm" group: one cuBLASLt call with the epilogue.
  void run_gemm_group(const ir::Node& node, const GemmGroup& gemm,
                      std::span<const Tensor> operands, std::span<const int64_t> symbols,
                      std::span<Tensor> results) const;

  std::shared_ptr<const ir::Graph> graph_;
  FusedLauncher launch_;
  size_t caller_inputs_ = 0;
  std::unordered_map<const ir::Node*, Group> groups_;
  std::unordered_map<const ir::Node*, GemmGroup> gemm_groups_;  // run by cuBLASLt
  std::atomic<bool> ran_{false};
  std::atomic<uint64_t> generated_{0}, eager_{0}, library_{0};  // the latest run's launches
  std::once_flag constants_placed_;
  std::vector<Tensor> placed_constants_;  // by input: a constant's data on its type's device
  std::unique_ptr<interp::Executable> node_loop_;
  std::unique_ptr<DevicePlan> plan_;  // null: the node loop runs every call
  bool fresh_random_ = true;             // random ops draw new positions each call
  std::unique_ptr<GraphReplay> replay_;  // null: every call runs the node loop
};

}  // namespace kiln::cuda::exec
