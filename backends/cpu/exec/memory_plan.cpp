// Liveness-based buffer sharing (memory_plan.h).
#include "kiln/cpu/exec/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "kiln/ops/fused.h"

namespace kiln::cpu::exec {

namespace {

std::string bytes_str(size_t bytes) {
  std::ostringstream os;
  os.precision(3);
  if (bytes >= (size_t{1} << 20))
    os << static_cast<double>(bytes) / (1 << 20) << " MiB";
  else if (bytes >= 1024)
    os << static_cast<double>(bytes) / 1024 << " KiB";
  else
    os << bytes << " B";
  return os.str();
}

}  // namespace

ScheduleLiveness schedule_liveness(const ir::Graph& graph, std::span<const ir::Node* const> steps,
                                   size_t value_count) {
  ScheduleLiveness live;
  live.escapes.assign(value_count, false);
  live.last_use.assign(value_count, -1);
  live.roots.resize(value_count);
  for (const ir::GraphOutput& o : graph.outputs()) live.escapes[o.value->id] = true;
  // Backwards: a view of an escaping value makes what it views escape too.
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const ir::Node& n = **it;
    if (!n.op->kernel_makes_outputs) continue;
    bool out_escapes = std::any_of(n.outputs.begin(), n.outputs.end(),
                                   [&](const ir::Value* v) { return live.escapes[v->id]; });
    if (out_escapes)
      for (const ir::Value* v : n.inputs)
        if (v) live.escapes[v->id] = true;
  }
  // Forwards: a read of a view reads the values it aliases.
  for (size_t s = 0; s < steps.size(); ++s) {
    const ir::Node& n = *steps[s];
    const int step = static_cast<int>(s);
    for (const ir::Value* v : n.inputs) {
      if (!v) continue;
      live.last_use[v->id] = step;
      for (int r : live.roots[v->id]) live.last_use[r] = step;
    }
    for (const ir::Value* out : n.outputs) {
      live.last_use[out->id] = step;
      if (!n.op->kernel_makes_outputs) continue;
      std::vector<int>& roots = live.roots[out->id];
      for (const ir::Value* v : n.inputs) {
        if (!v) continue;
        roots.push_back(v->id);
        roots.insert(roots.end(), live.roots[v->id].begin(), live.roots[v->id].end());
      }
    }
  }
  return live;
}

int inplace_input(const ir::Node& node, int index, const ir::Type& out,
                  const ScheduleLiveness& liveness, const std::vector<bool>& planned,
                  const std::vector<int>& taken) {
  if (node.op != &ops::fused || static_cast<const ops::FusedAttrs&>(*node.attrs).kind != "elementwise")
    return -1;
  auto views = [&](const ir::Value* v, int id) {
    const std::vector<int>& roots = liveness.roots[v->id];
    return std::find(roots.begin(), roots.end(), id) != roots.end();
  };
  for (const ir::Value* candidate : node.inputs) {
    if (!candidate) continue;
    const int id = candidate->id;
    if (!planned[id] || liveness.last_use[id] != index) continue;
    if (candidate->type.dtype != out.dtype || candidate->type.shape != out.shape) continue;
    if (std::find(taken.begin(), taken.end(), id) != taken.end()) continue;
    if (std::any_of(node.inputs.begin(), node.inputs.end(),
                    [&](const ir::Value* v) { return v && views(v, id); }))
      continue;
    return id;
  }
  return -1;
}

std::string MemoryPlan::str() const {
  return std::to_string(slot_bytes.size()) + " buffers, " + bytes_str(planned_bytes) + " for " +
         std::to_string(slot_of.size()) + " intermediates (" + bytes_str(unshared_bytes) +
         " unshared, eager peak " + bytes_str(eager_peak_bytes) + ")" +
         (inplace ? ", " + std::to_string(inplace) + " in place" : "");
}

MemoryPlan plan_memory(const std::vector<ValueLifetime>& values) {
  MemoryPlan plan;
  plan.slot_of.assign(values.size(), -1);
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a].def < values[b].def; });
  std::vector<int> free_slots;
  std::vector<size_t> live;  // values holding a buffer, by index
  for (size_t v : order) {
    const ValueLifetime& value = values[v];
    plan.unshared_bytes += value.bytes;
    // Buffers whose value was last read before this step are free again.
    for (size_t i = 0; i < live.size();) {
      if (values[live[i]].last_use < value.def) {
        free_slots.push_back(plan.slot_of[live[i]]);
        live[i] = live.back();
        live.pop_back();
      } else {
        ++i;
      }
    }
    // In place: the buffer of the value this step reads for the last time.
    if (value.inplace_of >= 0) {
      const auto u = static_cast<size_t>(value.inplace_of);
      auto held = std::find(live.begin(), live.end(), u);
      int slot = plan.slot_of[u];
      if (held != live.end() && values[u].last_use == value.def &&
          plan.slot_bytes[static_cast<size_t>(slot)] >= value.bytes) {
        *held = v;
        plan.slot_of[v] = slot;
        ++plan.inplace;
        continue;
      }
    }
    int best = -1;
    for (size_t i = 0; i < free_slots.size(); ++i) {
      size_t size = plan.slot_bytes[static_cast<size_t>(free_slots[i])];
      int current = best < 0 ? -1 : free_slots[static_cast<size_t>(best)];
      bool fits = size >= value.bytes;
      bool best_fits = current >= 0 && plan.slot_bytes[static_cast<size_t>(current)] >= value.bytes;
      if (best < 0 ||
          (fits && (!best_fits || size < plan.slot_bytes[static_cast<size_t>(current)])) ||
          (!fits && !best_fits && size > plan.slot_bytes[static_cast<size_t>(current)]))
        best = static_cast<int>(i);
    }
    int slot;
    if (best >= 0) {
      slot = free_slots[static_cast<size_t>(best)];
      free_slots.erase(free_slots.begin() + best);
      size_t& size = plan.slot_bytes[static_cast<size_t>(slot)];
      size = std::max(size, value.bytes);
    } else {
      slot = static_cast<int>(plan.slot_bytes.size());
      plan.slot_bytes.push_back(value.bytes);
    }
    plan.slot_of[v] = slot;
    live.push_back(v);
  }
  plan.planned_bytes = std::accumulate(plan.slot_bytes.begin(), plan.slot_bytes.end(), size_t{0});
  int last_step = 0;
  for (const ValueLifetime& value : values) last_step = std::max(last_step, value.last_use);
  for (int step = 0; step <= last_step; ++step) {
    size_t live_bytes = 0;
    for (const ValueLifetime& value : values)
      if (value.def <= step && step <= value.last_use) live_bytes += value.bytes;
    plan.eager_peak_bytes = std::max(plan.eager_peak_bytes, live_bytes);
  }
  return plan;
}

}  // namespace kiln::cpu::exec
