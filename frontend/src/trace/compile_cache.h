// The compiled-module cache behind kiln::compile, shared by its three files:
//   compiled.cpp          the cache and its recompile policy: guards, entries, the backend
//                         chosen for each entry, running it, the cache limit
//   compiled_trace.cpp    tracing an entry, with symbolic sizes where they hold
//   compiled_explain.cpp  what explain reports about the entries
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dynamic_shapes.h"
#include "guards.h"
#include "kiln/backends/backend.h"
#include "kiln/compile.h"
#include "tracer.h"

namespace kiln::detail {

// Traces one forward. `shapes` (one per input; empty: the inputs' own) may hold symbolic
// sizes. Undefined arguments (an absent mask) stay undefined; `defined_outputs` receives
// which of forward's results were defined (the graph returns only those).
std::unique_ptr<ir::Graph> trace_with(nn::Module& model, const std::vector<Tensor>& inputs,
                                      ForwardRef forward,
                                      std::vector<CapturedConstant>* captured,
                                      const std::vector<Shape>& shapes,
                                      std::vector<bool>* defined_outputs,
                                      const std::vector<std::string>& names,
                                      std::map<std::string, double>* module_ms = nullptr);

struct Entry {
  GuardSet guards;
  std::shared_ptr<const ir::Graph> graph;  // null for a segmented entry
  const backends::Backend* backend = nullptr;   // the one that runs `graph`
  std::unique_ptr<backends::Executable> executable;
  std::string backend_note;  // which backend runs this entry and why
  std::vector<Tensor> state;  // by graph input: the live parameter / buffer (else undefined)
  // CompileOptions::freeze: graph input -> the version of the parameter when it was frozen.
  std::vector<std::pair<size_t, uint64_t>> frozen;
  std::vector<std::pair<size_t, Tensor>> write_back;  // graph output index -> buffer
  std::vector<CapturedConstant> captured;
  std::vector<bool> defined_outputs;  // forward's results; the graph returns the defined ones
  std::string graph_break;
  // Segmented mode (an entry whose forward breaks the graph).
  SegmentCache segments;
  std::vector<GraphBreak> breaks;  // of the latest call
  size_t segments_per_call = 0;
  double trace_ms = 0;
  std::map<std::string, double> module_ms;  // trace time by module path
  uint64_t calls = 0;
};

// Why a frozen entry no longer matches: each parameter changed in place since it was frozen.
std::vector<std::string> frozen_failures(const Entry& e);

inline std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

class CompileCache final : public CompiledCore {
 public:
  CompileCache(std::shared_ptr<nn::Module> model, CompileOptions options)
      : model_(std::move(model)),
        options_(std::move(options)),
        backend_(options_.backend.empty() ? nullptr : &backends::backend(options_.backend)) {
    KILN_CHECK(options_.cache_limit >= 1, "[compile] cache_limit must be at least 1, got ",
               options_.cache_limit, ".");
  }

  std::vector<Tensor> call(const std::vector<Tensor>& tensors, std::vector<StaticArg> statics,
                           ForwardRef forward) override;
  ExplainReport explain() const override;
  std::vector<TracedGraph> traced_graphs() const override;

 private:
  GuardSet current_guards(const std::vector<Tensor>& tensors, std::vector<StaticArg> statics);
  Entry* find(const GuardSet& now);
  // `counted`: the caller already counted the call (under the lock).
  std::vector<Tensor> run(Entry& entry, const std::vector<Tensor>& tensors, bool counted = false);
  // Re-runs the C++ forward, executing its ops as segments that end at each host read.
  std::vector<Tensor> run_segmented(Entry& entry, const std::vector<Tensor>& tensors,
                                    ForwardRef forward);
  Entry& add_entry(const std::vector<Tensor>& tensors, GuardSet guards, ForwardRef forward);
  // The executable of a traced graph, from the backend backends::choose_backend picks for
  // the calls it guards.
  void make_executor(Entry& entry, const std::shared_ptr<const ir::Graph>& graph,
                     const std::vector<Tensor>& tensors);
  std::unique_ptr<ir::Graph> trace_entry(Entry& entry, const std::vector<Tensor>& tensors,
                                         ForwardRef forward, SymbolPlan& plan);
  // The cached entry with the fewest failing guards, and those failures.
  std::pair<const Entry*, std::vector<std::string>> closest(const GuardSet& now,
                                                            CompileOptions::Dynamic hints) const;
  std::vector<uint64_t> dynamic_masks(const std::vector<Tensor>& tensors) const;
  // Removes the entries whose frozen parameters changed (versions only grow: they can never
  // match again) and returns why.
  std::vector<std::string> evict_stale_frozen();
  // dynamic=Auto: the static dims whose size differs from the closest entry turn dynamic.
  void remember_changed_dims(const Entry& near, const GuardSet& now);

  std::shared_ptr<nn::Module> model_;
  CompileOptions options_;
  // options_.backend; null: each graph's default (backends::choose_backend: cpu or cuda).
  const backends::Backend* backend_;
  // Guards everything below. A call holds it to match (or add) its entry; a native entry's
  // graph then runs without it (cpu::compiler::CompiledGraph gives each concurrent call a plan of
  // its own), so threads calling one module run in parallel. Entries are shared: one that is
  // evicted while a call runs it lives until that call ends.
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Entry>> entries_;
  // The module signature as of state epoch `signature_epoch_`: reused while nothing changed.
  std::shared_ptr<const ModuleSignature> signature_;
  uint64_t signature_epoch_ = 0;
  std::vector<std::string> recompile_reasons_;
  std::vector<uint64_t> auto_dynamic_;   // by input: dims whose size changed (dynamic=Auto)
  std::vector<uint64_t> forced_static_;  // by input: dims a symbolic trace could not keep
  bool limit_warned_ = false;
  uint64_t calls_ = 0, eager_calls_ = 0;
};

}  // namespace kiln::detail
