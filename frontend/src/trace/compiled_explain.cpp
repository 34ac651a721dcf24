// What explain reports about a compiled module: per entry its guards, graphs before and after
// the backend's passes, fusion groups, graph breaks, captured constants and timings; and the
// traced graphs export reads.
#include <algorithm>

#include "compile_cache.h"
#include "kiln/ops/fused.h"

namespace kiln::detail {

namespace {

// "add, relu @fc1" for each fusion group of `g` (and of its regions).
std::vector<std::string> fusion_groups(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& node : g.nodes()) {
    if (node->op == &ops::fused) {
      std::string ops;
      for (const auto& inner : node->regions.at(0)->nodes())
        ops += (ops.empty() ? "" : ", ") + inner->op->name;
      out.push_back(ops + (node->module_path.empty() ? "" : " @" + node->module_path));
      continue;
    }
    for (const auto& region : node->regions) {
      std::vector<std::string> inner = fusion_groups(*region);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

}  // namespace

ExplainReport CompileCache::explain() const {
  std::lock_guard<std::mutex> lock(mutex_);  // a consistent snapshot, even during calls
  ExplainReport r;
  r.model = model_->type_name();
  // Named, or each graph's default: the one the latest graph's device picks.
  const backends::Backend* requested = backend_;
  if (!requested && !entries_.empty() && entries_.back()->graph)
    requested = backends::choose_backend(nullptr, *entries_.back()->graph, "").backend;
  r.backend = std::string((requested ? *requested : backends::default_backend()).name());
  r.calls = calls_;
  r.eager_calls = eager_calls_;
  r.recompile_reasons = recompile_reasons_;
  for (const auto& e : entries_) {
    ExplainEntry x;
    x.guards = describe_guards(e->guards, input_names(options_, e->guards.inputs.size()));
    x.graph_break = e->graph_break;
    x.segments = e->segments_per_call;
    x.segment_hits = e->segments.hits;
    x.segment_misses = e->segments.misses;
    x.native_segments = e->segments.native_misses;
    for (const GraphBreak& b : e->breaks) {
      x.breaks.push_back(
          str_cat(b.what, b.loc.known() ? " at " + ir::location_str(b.loc) : "", " in ",
                  b.module_path.empty() ? "the root module" : "module '" + b.module_path + "'"));
    }
    x.trace_ms = e->trace_ms;
    x.trace_ms_by_module.assign(e->module_ms.begin(), e->module_ms.end());
    std::sort(x.trace_ms_by_module.begin(), x.trace_ms_by_module.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    x.calls = e->calls;
    if (e->graph) {
      x.ops = e->graph->node_count();
      x.graph_text = ir::print_graph(*e->graph);
    }
    x.backend = e->backend_note;
    if (e->executable && e->backend != &backends::reference_backend()) {
      // Read again: a backend's line may tell what the latest call did (launches per call).
      std::string now = e->executable->summary();
      if (!now.empty()) x.backend = str_cat(e->backend->name(), ": ", now);
      x.passes = e->executable->pass_timings();
      x.optimized_graph_text = ir::print_graph(e->executable->optimized_graph());
      x.fusion_groups = fusion_groups(e->executable->optimized_graph());
    }
    for (const CapturedConstant& c : e->captured) {
      x.captured.push_back(
          str_cat(c.name, ": ", c.type, " read by ", c.op, " in ",
                  c.module_path.empty() ? "the root module" : c.module_path,
                  c.loc.known() ? " at " + ir::location_str(c.loc) : "",
                  c.requires_grad ? " (requires grad: it will never be trained)" : ""));
    }
    r.entries.push_back(std::move(x));
  }
  return r;
}

std::vector<TracedGraph> CompileCache::traced_graphs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TracedGraph> out;
  for (const auto& e : entries_)
    if (e->graph) out.push_back({e->graph, e->state});
  return out;
}

ExplainReport explain_core(const CompiledCore& core) {
  return core.explain();
}

}  // namespace kiln::detail
