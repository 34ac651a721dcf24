// Memory planning for the planned executor: intermediate values whose lifetimes do not
// overlap share one buffer. A value lives from the step that defines it to the last step
// that reads it or a view of it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::cpu::exec {

// The liveness of a straight-line schedule: `steps`, the nodes of one graph without control
// flow in the order they run. Vectors are indexed by value id.
struct ScheduleLiveness {
  // The caller receives the value, or a value that may alias it (the output of an op whose
  // kernel makes its outputs: a view), so it needs memory of its own every call.
  std::vector<bool> escapes;
  // The last step that reads the value or a view of it; its defining step when nothing
  // reads it; -1 for values no step touches (the graph's inputs that nothing reads).
  std::vector<int> last_use;
  // The values a view aliases (those its kernel-made outputs were made from, transitively).
  std::vector<std::vector<int>> roots;
};
ScheduleLiveness schedule_liveness(const ir::Graph& graph, std::span<const ir::Node* const> steps,
                                   size_t value_count);

// In place: an input of `node` (run as step `index`) whose buffer its output of type `out`
// may take, or -1. Only an elementwise fusion group qualifies: its kernel reads each element
// before writing the same element and never again (a row kernel reads its rows in several
// loops). The input has the output's dtype and shape (read at exactly the elements written),
// no later step reads it, `planned` says it holds a buffer of the plan, no other output took
// it already (`taken`), and no other input of the node views its memory (a broadcast row of
// it would be read after being overwritten).
int inplace_input(const ir::Node& node, int index, const ir::Type& out,
                  const ScheduleLiveness& liveness, const std::vector<bool>& planned,
                  const std::vector<int>& taken);

struct ValueLifetime {
  int def = 0;       // the step that writes it
  int last_use = 0;  // the last step that reads it (def when nothing does)
  size_t bytes = 0;
  // In place: the index (among the values planned) of a value whose buffer this one may
  // take although its defining step reads that value: the step reads it for the last time,
  // each element before writing the same element of this one (a generated elementwise
  // kernel), with the same size. -1: none.
  int inplace_of = -1;
};

struct MemoryPlan {
  std::vector<int> slot_of;        // by value (the order given): its shared buffer
  std::vector<size_t> slot_bytes;  // by buffer
  size_t planned_bytes = 0;        // sum of the buffers
  size_t unshared_bytes = 0;       // one buffer per value, as without planning
  // The most bytes live at once, counting a step's inputs and outputs as both live: what
  // running the steps eagerly (each intermediate freed after its last reader) holds at its
  // peak.
  size_t eager_peak_bytes = 0;
  int inplace = 0;  // values that took the buffer of a value their step read last
  // "3 buffers, 1.5 MiB for 7 intermediates (3.2 MiB unshared, eager peak 2 MiB), 1 in place"
  std::string str() const;
};

// Assigns each value a buffer no value with an overlapping lifetime holds. Values are
// visited in order of definition; a value takes the smallest free buffer that fits, else
// grows the largest free one, else gets a new one. A buffer is free again after the last
// use of its value (not during it: a step's outputs never overwrite its inputs), except
// that a value takes its inplace_of value's buffer when that value's last use is this
// value's defining step.
MemoryPlan plan_memory(const std::vector<ValueLifetime>& values);

}  // namespace kiln::cpu::exec
