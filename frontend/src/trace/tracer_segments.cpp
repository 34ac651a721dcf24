// Host reads of traced values: a GraphBreakError while tracing; in segmented mode, running
// the pending segment (through the segment cache) so the forward continues with real values.
#include "kiln/autograd.h"
#include "kiln/error.h"
#include "traced_value.h"
#include "user_location.h"

namespace kiln::detail {

void Tracer::on_concretize(const ir::Value* value, const char* what, SourceLoc loc) {
  ir::Location at = user_location(loc);
  std::string path = current_module_path();
  if (mode_ == Mode::Segmented) {
    KILN_CHECK(frames_.size() == 1, "[compile] ", what,
               at.known() ? " at " + ir::location_str(at) : std::string(),
               " reads a tensor's value inside a kiln control-flow body, which runs as part of "
               "one graph. Fix: make the body a function of tensors only (use kiln::cond for "
               "decisions).");
    breaks_.push_back({what, at, path});
    flush();
    return;
  }
  const ir::Node* producer = value->producer;
  bool data_dependent =
      static_cast<size_t>(value->id) < from_input_.size() && from_input_[value->id];
  std::string made_by =
      producer ? " (made by " + producer->op->name +
                     (producer->loc.known() ? " at " + ir::location_str(producer->loc) : "") + ")"
               : "";
  throw GraphBreakError(str_cat(
      "[compile] graph break in ", root_.type_name(), ": ", what,
      at.known() ? " at " + ir::location_str(at) : std::string(), " in ", where_str(path),
      " reads the value of a traced tensor ", ir::type_str(value->type), made_by, ". ",
      data_dependent ? "Its value depends on the input data" : "Its value is computed by the graph",
      ", which a compiled graph does not have while it is traced. Fix: write the "
      "data-dependent branch or loop with kiln::cond, kiln::while_loop, kiln::fori_loop or "
      "kiln::scan, or compile without fullgraph to split the forward at this point."));
}

void Tracer::reset_segment() {
  graph_ = std::make_unique<ir::Graph>(root_.type_name());
  frames_.clear();
  frames_.push_back(Frame{graph_.get()});
  concrete_values_.clear();
  owner_.clear();
  from_input_.clear();
  feeds_.clear();
  pending_.clear();
  buffer_writes_.clear();
  keep_alive_.clear();
  constants_ = 0;
}

void Tracer::flush() {
  // The results: every pending value a tensor still holds, then the written buffers.
  std::vector<std::shared_ptr<TensorImpl>> live;
  for (const auto& [value, weak] : pending_) {
    std::shared_ptr<TensorImpl> impl = weak.lock();
    auto* info = impl ? dynamic_cast<const TracedValue*>(impl->symbolic.get()) : nullptr;
    if (!info || info->value() != value) continue;  // gone, or rebound by an in-place op
    graph_->add_output(value);
    live.push_back(std::move(impl));
  }
  for (const auto& [path, value] : buffer_writes_)
    graph_->add_output(value, std::string(kBufferOutputPrefix) + path);
  if (!graph_->nodes().empty()) {
    ir::verify(*graph_);
    std::string grad_source;
    if (grad_mode_enabled())
      for (const Tensor& t : feeds_)
        if (t.defined() && t.requires_grad()) grad_source = "an input of the segment requires grad";
    backends::Choice choice = backends::choose_backend(segments_->backend, *graph_, grad_source);
    uint64_t key = ir::structural_hash(*graph_) * 2 + (choice.note.empty() ? 1 : 0);
    std::unique_ptr<backends::Executable>& exe = segments_->executables[key];
    if (exe) {
      ++segments_->hits;
    } else {
      ++segments_->misses;
      if (choice.backend != &backends::reference_backend()) ++segments_->native_misses;
      // Random ops replay the positions this call's forward drew.
      backends::CompileRequest request;
      request.replay_recorded_random = true;
      exe = choice.backend->compile(std::shared_ptr<const ir::Graph>(std::move(graph_)), request);
    }
    ++segments_run_;
    // Written buffers hold their old contents until the segment's results are copied in.
    for (const auto& impl : shadowed_buffers_) retired_.push_back(std::move(impl->symbolic));
    shadowed_buffers_.clear();
    // Run with the interceptor out of the way: the segment executes eagerly.
    set_interceptor(previous_);
    std::vector<Tensor> results;
    try {
      results = exe->run(feeds_);
    } catch (...) {
      set_interceptor(this);
      throw;
    }
    set_interceptor(this);
    for (size_t i = 0; i < live.size(); ++i) {
      TensorImpl& dst = *live[i];
      TensorImpl& src = *results[i].impl();
      retired_.push_back(std::move(dst.symbolic));
      dst.storage = src.storage;
      dst.sizes = src.sizes;
      dst.strides = src.strides;
      dst.offset = src.offset;
      dst.is_view = src.is_view;
      dst.autograd = std::move(src.autograd);
    }
    for (size_t b = 0; b < buffer_writes_.size(); ++b) {
      Tensor buffer = buffers_by_path_.at(buffer_writes_[b].first);
      set_interceptor(previous_);
      {
        NoGradGuard no_grad;
        buffer.copy_(results[live.size() + b]);
      }
      set_interceptor(this);
    }
  }
  reset_segment();
}

void Tracer::finish_segments() {
  flush();
  uninstall();
}

}  // namespace kiln::detail
