// The compiled-module cache: finds the entry whose guards hold, traces and compiles on a
// miss (logging why), runs the entry's backend with the live parameters and buffers, and
// writes updated buffers back. The class is in compile_cache.h; tracing an entry is in
// compiled_trace.cpp, explain's report in compiled_explain.cpp.
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "compile_cache.h"
#include "kiln/autograd.h"
#include "kiln/init.h"
#include "kiln/ir/symbols.h"
#include "kiln/state_epoch.h"

namespace kiln::detail {

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

namespace {

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
        guard_failures(e->guards, now, hints, input_names(options_, now.inputs.size()), forced_static_);
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
  entry->segments.backend = backend_;
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
    if (graph) entry->guards.size_bounds = graph->size_bounds();
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

std::shared_ptr<CompiledCore> make_compiled_core(std::shared_ptr<nn::Module> model,
                                                 CompileOptions options) {
  KILN_CHECK(model != nullptr, "[compile] expected a module, got null.");
  init();  // registers the backends
  return std::make_shared<CompileCache>(std::move(model), std::move(options));
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
