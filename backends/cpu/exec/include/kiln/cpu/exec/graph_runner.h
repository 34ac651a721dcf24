// Runs a graph whose fusion groups have native kernels: on the planned executor (plan.h),
// or, for a graph with control flow, on the reference executor's node loop with the groups'
// kernels plugged in. The compiled cpu backend and kiln_rt both run their graphs here.
//
// A plan's buffers (and the node loop's state) belong to one call at a time: each call
// borrows an idle runner, or builds one, and gives it back, so concurrent calls share no
// buffers and never wait for each other.
//
// It is the backends::Executable of such a graph: the cpu backend's CompiledGraph adds the
// passes and code generation in front of it, kiln_rt uses it as it is.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/cpu/exec/plan.h"
#include "kiln/ir/graph.h"

namespace kiln::interp {
class Executable;
}

namespace kiln::cpu::exec {

class GraphRunner : public backends::Executable {
 public:
  using Kernels = std::unordered_map<const ir::Node*, FusedKernel>;
  // Builds the first runner now: a graph the executor cannot run fails here, not in a call.
  // `caller_inputs`: how many inputs callers may pass instead of all of the graph's (the
  // passes may have appended constants a caller does not know about); 0: all of them.
  GraphRunner(std::shared_ptr<const ir::Graph> graph, Kernels kernels, size_t caller_inputs = 0);
  ~GraphRunner() override;
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // One tensor per graph input (or the first `caller_inputs`), in order; inputs left out or
  // undefined are read from the graph. One tensor per output. Thread-safe.
  std::vector<Tensor> run(std::span<const Tensor> inputs) override;
  bool runs_concurrently() const override { return true; }
  const ir::Graph& optimized_graph() const override { return *graph_; }
  std::string summary() const override { return ""; }
  std::string pass_timings() const override { return ""; }

  // The plan of the first runner (for its statistics); null for a graph with control flow.
  const Plan* first_plan() const { return first_plan_; }
  // Times the plans packed a weight so far; 0 without a plan.
  int64_t weight_packs() const;
  // Random ops replay the positions their attributes hold (segments, see interp.h).
  void set_replay_recorded_random(bool replay);

 private:
  struct Runner;
  std::unique_ptr<Runner> make_runner() const;
  Runner* borrow();
  void give_back(Runner* runner);

  std::shared_ptr<const ir::Graph> graph_;
  Kernels kernels_;
  size_t caller_inputs_ = 0;
  const Plan* first_plan_ = nullptr;

  mutable std::mutex mutex_;                      // guards everything below
  std::vector<std::unique_ptr<Runner>> runners_;  // every runner built, idle or lent
  std::vector<Runner*> idle_;
  bool replay_recorded_random_ = false;
};

}  // namespace kiln::cpu::exec
