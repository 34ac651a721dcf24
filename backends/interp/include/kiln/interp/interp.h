// The reference backend: runs an IR graph node by node through the eager op table, so its
// results are eager's by construction (bitwise, on the same thread count). Autograd records
// through the same dispatch, so a graph run with grad mode on can be backpropagated.
// Symbolic sizes take their values from the inputs on each run, and attributes that hold
// them (reshape sizes, factory shapes) are rewritten with those values. Each value is let go
// after the last node that reads it, so a run holds what eager code would hold (on a GPU,
// the caching allocator reuses the memory for the next nodes' results).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/symbol_binding.h"

namespace kiln::interp {

// Registers this executor as the backend "interp" (kiln/backends/backend.h). Idempotent;
// kiln::init() calls it.
void register_backend();

class Executable {
 public:
  explicit Executable(std::shared_ptr<const ir::Graph> graph);

  // `inputs` holds one tensor per graph input, in the graph's order (the caller resolves
  // parameters and buffers from the live module; constants may be passed undefined, the
  // graph's own data is used). Returns one tensor per graph output.
  std::vector<Tensor> run(std::span<const Tensor> inputs);

  const ir::Graph& graph() const { return *graph_; }
  // Random ops (OpDef::reseed) draw fresh stream positions on every run, as eager calls do.
  // A segment re-recorded on each call, whose forward already drew them, replays the
  // recorded positions instead.
  void set_replay_recorded_random(bool replay) { replay_recorded_random_ = replay; }

  // Runs `fused` nodes (fusion groups) some other way than op by op: a compiled backend
  // runs them as generated kernels and leaves the other nodes to this executor. Receives
  // the node, its operands, the runtime value of every symbol (ir/symbols.h) and fills
  // one tensor per result.
  using FusedRunner =
      std::function<void(const ir::Node& node, std::span<const Tensor> operands,
                         std::span<const int64_t> symbols, std::span<Tensor> results)>;
  void set_fused_runner(FusedRunner runner) { fused_runner_ = std::move(runner); }

 private:
  struct RunState;

  std::vector<Tensor> run_graph(const ir::Graph& g, std::span<const Tensor> inputs,
                                RunState& state);
  void run_control_flow(const ir::Node& node, std::span<const Tensor> args,
                        std::span<Tensor> outputs, RunState& state);

  std::shared_ptr<const ir::Graph> graph_;
  int value_count_ = 0;
  std::vector<ir::SymbolSource> symbol_sources_;
  std::unordered_set<const ir::Node*> symbolic_attrs_;  // nodes whose attributes hold symbols
  // By graph (the top one and every region) and node index: the values no later node of that
  // graph reads and it does not return, to let go of once the node has run.
  std::unordered_map<const ir::Graph*, std::vector<std::vector<int>>> released_after_;
  bool replay_recorded_random_ = false;
  FusedRunner fused_runner_;
};

}  // namespace kiln::interp
