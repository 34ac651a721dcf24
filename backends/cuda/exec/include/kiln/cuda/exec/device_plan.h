// The compiled GPU backend's schedule for a graph without control flow: its nodes in order,
// each eager op called through its CUDA kernel directly (no shape inference, device checks
// or autograd bookkeeping per call), and every intermediate that does not reach the caller
// placed by liveness (cpu/exec/memory_plan.h) in one arena: a single device allocation per
// call from the caching allocator, on the current stream, given back when the call's work is
// queued. Values whose lifetimes do not overlap share bytes of the arena, and an elementwise
// kernel may write over an input it reads for the last time.
//
// Why one arena per call rather than buffers kept between calls (the CPU plan's choice):
// nothing is held while the model is idle, concurrent calls on any streams need no locking
// (each has its own arena, ordered on its stream by the allocator), and a call captured as a
// CUDA graph gets its arena from the graph's pool, so replays reuse it at fixed addresses.
//
//   DevicePlan::build(graph, run_group)   // null when the graph holds control flow
//   plan->run(inputs, symbols, fresh_random);
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kiln/cpu/exec/memory_plan.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbol_binding.h"
#include "kiln/op.h"

namespace kiln::cuda::exec {

class DevicePlan {
 public:
  // Runs a fusion group (a generated kernel or a cuBLASLt call with its epilogue) into
  // `results`: a result already defined is the arena's memory for it; an undefined one is
  // allocated by the runner.
  using GroupRunner =
      std::function<void(const ir::Node& node, std::span<const Tensor> operands,
                         std::span<const int64_t> symbols, std::span<Tensor> results)>;

  // Null when the graph holds control flow (cond, loops, scan: the reference executor's node
  // loop runs those) or a node whose results live on the CPU.
  static std::unique_ptr<DevicePlan> build(const ir::Graph& graph, GroupRunner run_group);
  ~DevicePlan();

  // One tensor per graph input (constants resolved by the caller), in order. Returns when the
  // work is queued. `fresh_random`: random ops draw new stream positions, as eager calls do
  // (else they replay the positions their attributes hold). Thread-safe.
  std::vector<Tensor> run(std::span<const Tensor> inputs, bool fresh_random);

  // The latest call's memory plan: "3 buffers, 1.5 MiB for 7 intermediates (3.2 MiB
  // unshared, eager peak 2 MiB), 1 in place"; empty before the first call.
  std::string memory_summary() const;

 private:
  struct Step;
  struct Layout;
  explicit DevicePlan(const ir::Graph& graph, GroupRunner run_group);
  // The arena layout for these symbol values (the latest one is kept).
  std::shared_ptr<const Layout> layout_for(const ir::SymbolValues& symbols);

  const ir::Graph& graph_;
  GroupRunner run_group_;
  size_t value_count_ = 0;
  std::vector<ir::SymbolSource> symbol_sources_;
  std::vector<Step> steps_;
  // The values placed in the arena, by plan index: their id, type and lifetime.
  std::vector<int> planned_ids_;
  std::vector<const ir::Type*> planned_types_;
  std::vector<cpu::exec::ValueLifetime> lifetimes_;
  mutable std::mutex layout_mutex_;
  std::shared_ptr<const Layout> layout_;  // for layout_symbols_
  ir::SymbolValues layout_symbols_;
};

}  // namespace kiln::cuda::exec
