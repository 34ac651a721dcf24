// The compiled CPU backend's executor: a schedule planned once per graph, whose steps call
// generated kernels and eager kernels directly, with no shape inference, dispatch or
// autograd bookkeeping per call. Intermediate buffers are allocated on the first call and
// reused by later ones (reallocated only when a symbolic size changes); only the results
// handed back to the caller, and the views of them, are fresh each call.
#pragma once

#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kiln/codegen/kernels.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbol_binding.h"

namespace kiln::cpu {

// A generated kernel and how its iteration dims follow from its node's output shape.
struct FusedKernel {
  codegen::KernelFn fn = nullptr;
  std::vector<std::vector<int>> dim_groups;  // output dims merged into each iteration dim
};

// Runs one fusion group: operands made dense where needed, results allocated unless
// `results` already hold buffers of the right shape, then the kernel split across threads.
void run_fused_kernel(const FusedKernel& kernel, const ir::Node& node,
                      std::span<const Tensor> operands, std::span<const int64_t> symbols,
                      std::span<Tensor> results, bool reuse_results);

class Plan {
 public:
  // Null when the graph holds control flow (its regions run on the reference executor's
  // node loop instead).
  static std::unique_ptr<Plan> build(
      const ir::Graph& graph, const std::unordered_map<const ir::Node*, FusedKernel>& kernels);
  ~Plan();

  std::vector<Tensor> run(std::span<const Tensor> inputs);
  void set_replay_recorded_random(bool replay) { replay_recorded_random_ = replay; }

 private:
  struct Step;
  explicit Plan(const ir::Graph& graph);

  const ir::Graph& graph_;
  std::vector<ir::SymbolSource> symbol_sources_;
  std::vector<Step> steps_;
  std::vector<Tensor> slots_;   // by value id: this call's tensors (kept: reusable buffers)
  std::vector<int> transient_;  // value ids cleared after each call (inputs, results, views)
  bool replay_recorded_random_ = false;
};

}  // namespace kiln::cpu
