// The compiled-module cache: finds the entry whose guards hold, traces and compiles on a
// miss (logging why), runs the entry's backend with the live parameters and buffers, and
// writes updated buffers back.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "dynamic_shapes.h"
#include "guards.h"
#include "kiln/autograd.h"
#include "kiln/backends/backend.h"
#include "kiln/compile.h"
#include "kiln/init.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/fused.h"
#include "kiln/state_epoch.h"
#include "tracer.h"

namespace kiln::detail {

namespace {

// Traces one forward. `shapes` (one per input; empty: the inputs' own) may hold symbolic
// sizes. Undefined arguments (an absent mask) stay undefined; `defined_outputs` receives
// which of forward's results were defined (the graph returns only those).
std::unique_ptr<ir::Graph> trace_with(nn::Module& model, const std::vector<Tensor>& inputs,
                                      ForwardRef forward,
                                      std::vector<CapturedConstant>* captured,
                                      const std::vector<Shape>& shapes,
                                      std::vector<bool>* defined_outputs,
                                      const std::vector<std::string>& names,
                                      std::map<std::string, double>* module_ms = nullptr) {
  Tracer tracer(model, model.type_name());
  std::vector<Tensor> symbolic;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      symbolic.emplace_back();
      continue;
    }
    Shape shape = i < shapes.size() ? shapes[i] : Shape(inputs[i].sizes());
    symbolic.push_back(tracer.add_input(inputs[i], names.at(i), shape));
  }
  std::vector<Tensor> outputs = forward(symbolic);
  if (defined_outputs) defined_outputs->clear();
  for (const Tensor& t : outputs) {
    if (defined_outputs) defined_outputs->push_back(t.defined());
    if (t.defined()) tracer.add_output(t);
  }
  std::unique_ptr<ir::Graph> graph = tracer.finish();
  ir::verify(*graph);
  for (const CapturedConstant& c : tracer.captured()) {
    if (!c.requires_grad) continue;
    log_warning(
        str_cat("[compile] ", model.type_name(), ": ", c.op, " in ",
                c.module_path.empty() ? "the root module" : "module '" + c.module_path + "'",
                c.loc.known() ? " at " + ir::location_str(c.loc) : "", " reads a ", c.type,
                " tensor that requires grad but is not a registered parameter: "
                "the graph holds it as a constant, so it will never be trained. Fix: "
                "register it with register_parameter."));
  }
  if (captured) *captured = tracer.captured();
  if (module_ms) *module_ms = tracer.module_ms();
  return graph;
}

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
std::vector<std::string> frozen_failures(const Entry& e) {
  std::vector<std::string> out;
  for (const auto& [input, version] : e.frozen) {
    uint64_t now = e.state[input].version();
    if (now != version)
      out.push_back("parameter " + e.graph->inputs()[input].name +
                    " changed in place since it was frozen (version " + std::to_string(version) +
                    " -> " + std::to_string(now) +
                    "; compile without freeze for parameters that keep changing)");
  }
  return out;
}

}  // namespace

class CompileCache final : public CompiledCore {
 public:
  CompileCache(std::shared_ptr<nn::Module> model, CompileOptions options)
      : model_(std::move(model)),
        options_(std::move(options)),
        backend_(options_.backend.empty() ? backends::default_backend()
                                          : backends::backend(options_.backend)) {
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
  const backends::Backend& backend_;  // options_.backend, or the build's default
  // Guards everything below. A call holds it to match (or add) its entry; a native entry's
  // graph then runs without it (cpu::CompiledGraph gives each concurrent call a plan of its
  // own), so threads calling one module run in parallel. Entries are shared: one that is
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

namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

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

// KILN_VERIFY_PASSES=1 runs the IR verifier after every pass of every compiled graph.
bool verify_passes_from_env() {
  const char* env = std::getenv("KILN_VERIFY_PASSES");
  return env && std::string_view(env) == "1";
}

}  // namespace

GuardSet CompileCache::current_guards(const std::vector<Tensor>& tensors,
                                      std::vector<StaticArg> statics) {
  GuardSet g;
  for (const Tensor& t : tensors) g.inputs.push_back(tensor_guard(t));
  g.static_args = std::move(statics);
  g.grad_mode = grad_mode_enabled();
  uint64_t epoch = state_epoch();
  if (epoch != signature_epoch_) {
    signature_ = std::make_shared<const ModuleSignature>(module_signature(*model_));
    signature_epoch_ = epoch;
  }
  g.module = signature_;
  return g;
}

Entry* CompileCache::find(const GuardSet& now) {
  for (auto& e : entries_) {
    if (call_guards_hold(e->guards, now) && same_module_state(e->guards, now) &&
        frozen_failures(*e).empty()) {
      e->guards.module = now.module;  // equal: share it, so the next check is a pointer compare
      return e.get();
    }
  }
  return nullptr;
}

std::vector<std::string> CompileCache::evict_stale_frozen() {
  std::vector<std::string> why;
  std::erase_if(entries_, [&](const std::shared_ptr<Entry>& e) {
    std::vector<std::string> f = frozen_failures(*e);
    why.insert(why.end(), f.begin(), f.end());
    return !f.empty();
  });
  return why;
}

std::pair<const Entry*, std::vector<std::string>> CompileCache::closest(
    const GuardSet& now, CompileOptions::Dynamic hints) const {
  const Entry* best = nullptr;
  std::vector<std::string> failures;
  for (const auto& e : entries_) {
    std::vector<std::string> f =
        guard_failures(e->guards, now, hints, input_names(options_, now.inputs.size()));
    if (!best || f.size() < failures.size()) {
      best = e.get();
      failures = std::move(f);
    }
  }
  return {best, failures};
}

void CompileCache::remember_changed_dims(const Entry& near, const GuardSet& now) {
  auto_dynamic_.resize(now.inputs.size(), 0);
  for (size_t i = 0; i < now.inputs.size() && i < near.guards.inputs.size(); ++i) {
    const Shape& was = near.guards.inputs[i].shape;
    const Shape& is = now.inputs[i].shape;
    if (was.size() != is.size()) continue;
    for (size_t d = 0; d < was.size() && d < 64; ++d)
      if (was[d] != is[d] && !ir::is_symbolic_size(was[d])) auto_dynamic_[i] |= 1ull << d;
  }
}

std::vector<uint64_t> CompileCache::dynamic_masks(const std::vector<Tensor>& tensors) const {
  std::vector<uint64_t> masks(tensors.size(), 0);
  if (options_.dynamic == CompileOptions::Dynamic::Off) return masks;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) continue;
    if (options_.dynamic == CompileOptions::Dynamic::On) {
      masks[i] = ~0ull;
      continue;
    }
    masks[i] = tensors[i].impl()->dynamic_dims | (i < auto_dynamic_.size() ? auto_dynamic_[i] : 0);
  }
  for (size_t i = 0; i < masks.size() && i < forced_static_.size(); ++i)
    masks[i] &= ~forced_static_[i];
  return masks;
}

std::vector<Tensor> CompileCache::run(Entry& entry, const std::vector<Tensor>& tensors,
                                      bool counted) {
  if (!counted) ++entry.calls;
  const auto& graph_inputs = entry.graph->inputs();
  std::vector<Tensor> args(graph_inputs.size());
  size_t next_user = 0;
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    if (graph_inputs[i].kind != ir::InputKind::Input) {
      args[i] = entry.state[i];  // constants: undefined, the graph holds them
      continue;
    }
    while (!tensors[next_user].defined()) ++next_user;  // absent arguments are not inputs
    args[i] = tensors[next_user++];
  }
  std::vector<Tensor> outputs = entry.executable->run(args);
  if (!entry.write_back.empty()) {
    NoGradGuard no_grad;
    for (const auto& [index, buffer] : entry.write_back) {
      Tensor target = buffer;
      target.copy_(outputs[index]);
    }
    outputs.resize(outputs.size() - entry.write_back.size());
  }
  std::vector<Tensor> results;
  size_t next = 0;
  for (bool defined : entry.defined_outputs)
    results.push_back(defined ? outputs[next++] : Tensor());
  return results;
}

namespace {

// The plan with only each input's leading dim (the batch) left symbolic.
SymbolPlan leading_dims_only(SymbolPlan plan) {
  bool changed = false;
  for (auto& dims : plan.symbols) {
    for (size_t d = 1; d < dims.size(); ++d) {
      changed |= dims[d] >= 0;
      dims[d] = -1;
    }
  }
  bool any = false;
  for (const auto& dims : plan.symbols) any |= !dims.empty() && dims[0] >= 0;
  if (!changed || !any) return SymbolPlan();
  return plan;
}

}  // namespace

std::unique_ptr<ir::Graph> CompileCache::trace_entry(Entry& entry,
                                                     const std::vector<Tensor>& tensors,
                                                     ForwardRef forward, SymbolPlan& plan) {
  std::vector<std::string> names = input_names(options_, tensors.size());
  // Try the requested symbolic dims, then the leading dims alone, then static sizes.
  while (plan.any()) {
    // Trace with each sentinel set; the graph holds for every size only if both agree.
    std::vector<Shape> main, alternate;
    for (size_t i = 0; i < tensors.size(); ++i) {
      bool defined = tensors[i].defined();
      main.push_back(defined ? traced_shape(tensors[i], plan.symbols[i], false) : Shape());
      alternate.push_back(defined ? traced_shape(tensors[i], plan.symbols[i], true) : Shape());
    }
    std::string why;
    try {
      auto graph = trace_with(*model_, tensors, forward, &entry.captured, main,
                              &entry.defined_outputs, names, &entry.module_ms);
      auto twin = trace_with(*model_, tensors, forward, nullptr, alternate, nullptr, names);
      translate_alternate(*twin);
      std::optional<std::string> diff = first_difference(*graph, *twin);
      if (!diff) return graph;
      why = *diff +
            " uses a dynamic size in a way a symbolic size cannot express (a sum, a "
            "quotient or a host comparison of sizes)";
    } catch (const GraphBreakError&) {
      throw;
    } catch (const Error& e) {
      // The message quotes sentinel numbers: name only the op that refused them.
      std::string msg = e.what();
      size_t close = msg.find(']');
      std::string op = msg.rfind('[', 0) == 0 && close != std::string::npos
                           ? " in " + msg.substr(0, close + 1)
                           : "";
      why = "tracing with symbolic sizes failed" + op +
            " (a size check there needs the size's value: a layer's feature dim, or host "
            "arithmetic on x.size(d))";
    }
    SymbolPlan next = leading_dims_only(plan);
    // Remember: later sizes do not retry the dims that just failed.
    forced_static_.resize(tensors.size(), 0);
    for (size_t i = 0; i < plan.symbols.size(); ++i)
      for (size_t d = 0; d < plan.symbols[i].size() && d < 64; ++d)
        if (plan.symbols[i][d] >= 0 && (next.symbols.empty() || next.symbols[i][d] < 0))
          forced_static_[i] |= 1ull << d;
    log_line(LogChannel::Recompiles,
             str_cat(model_->type_name(),
                     next.any() ? ": dims after the leading one compiled as static sizes: "
                                : ": dynamic dims compiled as static sizes: ",
                     why));
    plan = std::move(next);
  }
  return trace_with(*model_, tensors, forward, &entry.captured, {}, &entry.defined_outputs, names,
                    &entry.module_ms);
}

std::vector<Tensor> CompileCache::run_segmented(Entry& entry, const std::vector<Tensor>& tensors,
                                                ForwardRef forward) {
  ++entry.calls;
  Tracer tracer(*model_, model_->type_name(), Tracer::Mode::Segmented, &entry.segments);
  std::vector<Tensor> outputs = forward(tensors);
  tracer.finish_segments();
  entry.breaks = tracer.breaks();
  entry.segments_per_call = tracer.segments_run();
  return outputs;
}

Entry& CompileCache::add_entry(const std::vector<Tensor>& tensors, GuardSet guards,
                               ForwardRef forward) {
  auto entry = std::make_unique<Entry>();
  entry->segments.backend = &backend_;
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ir::Graph> graph;
  SymbolPlan plan = plan_symbols(tensors, dynamic_masks(tensors));
  try {
    graph = trace_entry(*entry, tensors, forward, plan);
  } catch (const GraphBreakError& e) {
    if (options_.fullgraph) throw;
    entry->graph_break = e.what();
    log_line(LogChannel::GraphBreaks, e.what());
  }
  entry->trace_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // Tracing may have materialized lazy layers: guard the state as it is now.
  signature_epoch_ = 0;
  entry->guards = current_guards(tensors, std::move(guards.static_args));
  if (plan.any()) {
    entry->guards.symbolic = true;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].defined())
        entry->guards.inputs[i].shape = traced_shape(tensors[i], plan.symbols[i], false);
  }
  if (graph) {
    std::map<std::string, Tensor> state;
    for (const auto& [path, t] : model_->named_parameters("", true, false)) state[path] = t;
    for (const auto& [path, t] : model_->named_buffers("", true, false)) state[path] = t;
    entry->state.resize(graph->inputs().size());
    for (size_t i = 0; i < graph->inputs().size(); ++i) {
      const ir::GraphInput& in = graph->inputs()[i];
      if (in.kind == ir::InputKind::Parameter || in.kind == ir::InputKind::Buffer)
        entry->state[i] = state.at(in.name);
    }
    for (size_t i = 0; i < graph->outputs().size(); ++i) {
      const std::string& name = graph->outputs()[i].name;
      if (name.rfind(kBufferOutputPrefix, 0) == 0)
        entry->write_back.emplace_back(i, state.at(name.substr(kBufferOutputPrefix.size())));
    }
    if (log_enabled(LogChannel::Graphs)) log_line(LogChannel::Graphs, ir::print_graph(*graph));
    if (log_enabled(LogChannel::Guards))
      log_line(LogChannel::Guards,
               join(describe_guards(entry->guards, input_names(options_, tensors.size())), "; "));
    std::shared_ptr<const ir::Graph> shared(std::move(graph));
    make_executor(*entry, shared, tensors);
    entry->graph = std::move(shared);
  }
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

void CompileCache::make_executor(Entry& entry, const std::shared_ptr<const ir::Graph>& graph,
                                 const std::vector<Tensor>& tensors) {
  std::string grad_source;
  if (grad_mode_enabled()) {
    for (size_t i = 0; i < graph->inputs().size() && grad_source.empty(); ++i)
      if (entry.state[i].defined() && entry.state[i].requires_grad())
        grad_source = "parameter " + graph->inputs()[i].name + " requires grad";
    for (const Tensor& t : tensors)
      if (grad_source.empty() && t.defined() && t.requires_grad())
        grad_source = "an input requires grad";
  }
  backends::Choice choice = backends::choose_backend(backend_, *graph, grad_source);
  backends::CompileRequest request;
  request.verify_passes = verify_passes_from_env();
  request.print_sink = [](std::string_view pass, const std::string& text) {
    log_line(LogChannel::Passes, str_cat("after ", pass, ":\n", text));
  };
  if (log_enabled(LogChannel::Passes)) request.print_after = "all";
  if (options_.freeze) {
    request.frozen_state.resize(graph->inputs().size());
    for (size_t i = 0; i < graph->inputs().size(); ++i)
      if (graph->inputs()[i].kind == ir::InputKind::Parameter)
        request.frozen_state[i] = entry.state[i];
  }
  entry.backend = choice.backend;
  entry.executable = choice.backend->compile(graph, request);
  if (entry.executable->folded_frozen_state())
    for (size_t i = 0; i < request.frozen_state.size(); ++i)
      if (request.frozen_state[i].defined())
        entry.frozen.emplace_back(i, request.frozen_state[i].version());
  std::string stats = entry.executable->summary();
  entry.backend_note = !choice.note.empty() ? choice.note
                       : stats.empty()      ? std::string()
                                            : str_cat(choice.backend->name(), ": ", stats);
  if (!stats.empty())
    log_line(LogChannel::Passes, str_cat(model_->type_name(), ": ",
                                         entry.executable->pass_timings(), "; ", entry.backend_note));
}

std::vector<Tensor> CompileCache::call(const std::vector<Tensor>& tensors,
                                       std::vector<StaticArg> statics, ForwardRef forward) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++calls_;
  GuardSet now = current_guards(tensors, std::move(statics));
  Entry* entry = find(now);
  if (!entry) {
    std::string name = model_->type_name();
    std::vector<std::string> stale = evict_stale_frozen();
    if (static_cast<int>(entries_.size()) >= options_.cache_limit) {
      // Past the limit nothing turns dynamic by itself: hint at mark_dynamic.
      std::string why = join(closest(now, CompileOptions::Dynamic::On).second, "; ");
      KILN_CHECK(!options_.fullgraph, "[compile] ", name, " reached its cache limit (",
                 options_.cache_limit, " graphs) and this call matches none of them: ", why,
                 ". Fix: keep the failing guard stable (e.g. pad inputs to a few sizes), or "
                 "raise CompileOptions::cache_limit.");
      if (!limit_warned_) {
        limit_warned_ = true;
        log_warning(str_cat("compile cache limit (", options_.cache_limit, ") reached for ", name,
                            ": ", why, "; running it eagerly from now on when no graph matches"));
      }
      ++eager_calls_;
      return forward(tensors);
    }
    if (!entries_.empty() || !stale.empty()) {
      const Entry* near = nullptr;
      std::vector<std::string> failures = std::move(stale);
      if (failures.empty()) std::tie(near, failures) = closest(now, options_.dynamic);
      std::string reason = str_cat("recompile ", entries_.size() + 1, "/", options_.cache_limit,
                                   " of ", name, ": ", join(failures, "; "));
      recompile_reasons_.push_back(reason);
      log_line(LogChannel::Recompiles, reason);
      if (near && options_.dynamic == CompileOptions::Dynamic::Auto)
        remember_changed_dims(*near, now);
    }
    entry = &add_entry(tensors, std::move(now), forward);
  }
  if (!entry->graph) return run_segmented(*entry, tensors, forward);
  // An executable that runs calls concurrently and writes no buffer back runs outside the
  // lock; the others (the reference executor, training-mode batch_norm's write-backs) stay
  // serialized.
  if (entry->executable->runs_concurrently() && entry->write_back.empty()) {
    std::shared_ptr<Entry> running;
    for (const auto& e : entries_)
      if (e.get() == entry) running = e;
    ++entry->calls;
    lock.unlock();
    return run(*running, tensors, /*counted=*/true);
  }
  return run(*entry, tensors);
}

std::unique_ptr<ir::Graph> trace_module(nn::Module& model, const std::vector<Tensor>& inputs,
                                        ForwardRef forward) {
  return trace_with(model, inputs, forward, nullptr, {}, nullptr,
                    input_names(CompileOptions{}, inputs.size()));
}

std::shared_ptr<CompiledCore> make_compiled_core(std::shared_ptr<nn::Module> model,
                                                 CompileOptions options) {
  KILN_CHECK(model != nullptr, "[compile] expected a module, got null.");
  init();  // registers the backends
  return std::make_shared<CompileCache>(std::move(model), std::move(options));
}

ExplainReport CompileCache::explain() const {
  std::lock_guard<std::mutex> lock(mutex_);  // a consistent snapshot, even during calls
  ExplainReport r;
  r.model = model_->type_name();
  r.backend = std::string(backend_.name());
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

namespace kiln {

const Tensor& mark_dynamic(const Tensor& t, int64_t dim) {
  KILN_CHECK(t.defined(), "[mark_dynamic] the tensor is undefined. Fix: pass the input tensor.");
  int64_t d = wrap_dim(dim, t.dim(), "mark_dynamic");
  KILN_CHECK(d < 64, "[mark_dynamic] dim ", dim, " is beyond the 64 dims kiln tracks.");
  t.impl()->dynamic_dims |= 1ull << d;
  return t;
}

}  // namespace kiln
