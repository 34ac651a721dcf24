// The tracer: records each intercepted op as an IR node and answers with symbolic tensors.
#include "tracer.h"

#include <typeinfo>

#include "kiln/error.h"
#include "traced_value.h"
#include "user_location.h"

namespace kiln::detail {

void TracedValue::check_data_read(const char* what, SourceLoc loc) const {
  if (Tracer* tracer = state_->tracer) {
    tracer->on_concretize(value_, what, loc);  // throws, or (segmented) makes it concrete
    return;
  }
  ir::Location at = user_location(loc);
  KILN_FAIL("[trace] ", what, at.known() ? " at " + ir::location_str(at) : std::string(),
            " read a tensor recorded by a trace that has ended: it has a type but no data. "
            "Fix: do not keep tensors made inside a traced forward (e.g. in a member "
            "variable) and use them afterwards.");
}

std::string TracedValue::describe() const {
  if (!state_->tracer) return "traced tensor of an ended trace";
  return "traced " + ir::type_str(value_->type) + " %" + std::to_string(value_->id);
}

const TracedValue* traced_info(const Tensor& t) {
  if (!t.defined() || !t.is_symbolic()) return nullptr;
  return dynamic_cast<const TracedValue*>(t.impl()->symbolic.get());
}

std::string current_module_path() {
  const auto& stack = nn::call_stack();
  return stack.empty() ? std::string() : stack.back().path;
}

std::string where_str(const std::string& path) {
  return path.empty() ? "the root module" : "module '" + path + "'";
}

Tracer::Tracer(nn::Module& root, std::string graph_name, Mode mode, SegmentCache* segments)
    : root_(root),
      state_(std::make_shared<State>()),
      graph_(std::make_unique<ir::Graph>(std::move(graph_name))),
      mode_(mode),
      segments_(segments) {
  KILN_CHECK(mode != Mode::Segmented || segments, "[trace] segmented mode needs a segment cache.");
  state_->tracer = this;
  frames_.push_back(Frame{graph_.get()});
  traced_grad_mode_ = grad_mode_enabled();
  for (const auto& [path, t] : root.named_parameters("", true, true))
    if (t.defined()) state_slots_.emplace(t.impl(), StateSlot{path, ir::InputKind::Parameter});
  for (const auto& [path, t] : root.named_buffers("", true, true)) {
    if (!t.defined()) continue;
    state_slots_.emplace(t.impl(), StateSlot{path, ir::InputKind::Buffer});
    buffers_by_path_.emplace(path, t);
  }
  previous_ = set_interceptor(this);
  installed_ = true;
}

Tracer::~Tracer() {
  uninstall();
  state_->tracer = nullptr;
}

void Tracer::uninstall() {
  if (!installed_) return;
  set_interceptor(previous_);
  installed_ = false;
  for (const auto& impl : shadowed_buffers_) impl->symbolic = nullptr;
  shadowed_buffers_.clear();
}

Tensor Tracer::make_traced(ir::Value* value, const Shape& strides, bool is_view) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = value->type.shape;
  impl->strides = strides.empty() && !value->type.shape.empty()
                      ? contiguous_strides(value->type.shape)
                      : strides;
  impl->is_view = is_view;
  impl->dtype = value->type.dtype;
  impl->device = value->type.device;
  Tensor t(std::move(impl));
  bind(t.impl_ptr(), value);
  return t;
}

void Tracer::bind(const std::shared_ptr<TensorImpl>& impl, ir::Value* value) {
  if (impl->symbolic) retired_.push_back(std::move(impl->symbolic));
  impl->symbolic = std::make_shared<TracedValue>(state_, value);
  if (mode_ == Mode::Segmented) pending_.emplace_back(value, impl);
}

Tensor Tracer::add_input(const Tensor& example, const std::string& name, const Shape& shape) {
  KILN_CHECK(example.defined(), "[trace] input '", name,
             "' is an undefined tensor. Fix: pass a tensor (an example of the real input).");
  KILN_CHECK(!example.is_symbolic(), "[trace] input '", name,
             "' is a symbolic tensor. Fix: pass a concrete example tensor.");
  ir::Type type = ir::Type::of(example);
  type.shape = shape;
  ir::Value* v = graph_->add_input(ir::InputKind::Input, name, type);
  owner_[v] = graph_.get();
  from_input_.resize(static_cast<size_t>(v->id) + 1, false);
  from_input_[v->id] = true;
  // A non-contiguous input (its strides are guarded) traces with its own strides.
  return example.is_contiguous() ? make_traced(v) : make_traced(v, Shape(example.strides()));
}

void Tracer::add_output(const Tensor& result) {
  KILN_CHECK(result.defined(),
             "[trace] forward returned an undefined tensor. Fix: return "
             "defined tensors from a traced forward.");
  static const OpDef* clone_op = find_op("clone");
  KILN_CHECK(frames_.size() == 1,
             "[trace] a forward result was added while a control-flow "
             "body is being recorded.");
  graph_->add_output(visible(value_of(result, *clone_op), 0, *clone_op));
}

std::unique_ptr<ir::Graph> Tracer::finish() {
  uninstall();
  for (const auto& [path, value] : buffer_writes_)
    graph_->add_output(value, std::string(kBufferOutputPrefix) + path);
  return std::move(graph_);
}

ir::Value* Tracer::capture(const Tensor& t, const OpDef& op) {
  auto slot = state_slots_.find(t.impl());
  ir::Value* v = nullptr;
  if (slot != state_slots_.end()) {
    v = graph_->add_input(slot->second.kind, slot->second.path, ir::Type::of(t));
  } else if (mode_ == Mode::Segmented) {
    // A segment's inputs change from call to call: fed, never baked in.
    v = graph_->add_input(ir::InputKind::Input, "input" + std::to_string(feeds_.size()),
                          ir::Type::of(t));
  } else {
    // Not part of the module: the graph keeps this tensor's data as it is now.
    bool literal = t.impl()->is_wrapped_number;  // x * 2: a host number, not state
    std::string name = (literal ? "scalar" : "const") + std::to_string(constants_++);
    v = graph_->add_input(ir::InputKind::Constant, name, ir::Type::of(t), t);
    if (!literal) {
      captured_.push_back(
          {name, current_module_path(), op.name, user_location(), t.type_str(), t.requires_grad()});
    }
  }
  keep_alive_.push_back(t);
  if (mode_ == Mode::Segmented) feeds_.push_back(t);
  owner_[v] = graph_.get();
  from_input_.resize(static_cast<size_t>(v->id) + 1, false);
  concrete_values_.emplace(t.impl(), v);
  return v;
}

ir::Value* Tracer::value_of(const Tensor& t, const OpDef& op) {
  if (!t.defined()) return nullptr;
  if (const TracedValue* info = traced_info(t)) {
    KILN_CHECK(info->belongs_to(state_.get()), "[trace] ", op.name,
               " got a tensor recorded by another trace. Fix: do not carry tensors from one "
               "traced forward into another.");
    return info->value();
  }
  if (t.is_symbolic()) {
    // A lazy parameter or a shape-only tensor explains itself.
    t.impl()->symbolic->check_data_read(("the traced " + op.name).c_str(), SourceLoc());
    KILN_FAIL("[trace] ", op.name, " got a symbolic tensor that is not part of this trace (",
              t.type_str(), "). Fix: pass concrete tensors or this trace's own tensors.");
  }
  auto it = concrete_values_.find(t.impl());
  if (it != concrete_values_.end()) return it->second;
  return capture(t, op);
}

void Tracer::bound_size(const Tensor& result, int64_t size, int64_t max) {
  const TracedValue* info = traced_info(result);
  KILN_CHECK(info && info->belongs_to(state_.get()) && info->value()->producer,
             "[trace] a size bound needs a tensor this trace recorded.");
  const ir::Node& node = *info->value()->producer;
  graph_->add_size_bound({size, max, node.op->name, node.module_path, node.loc});
}

ir::Node* Tracer::record(const OpDef& op, const Attrs& attrs, TensorSpan inputs,
                         const std::vector<ir::Type>& types) {
  KILN_CHECK(typeid(attrs) == typeid(*op.attrs_prototype), "[trace] ", op.name,
             " was called with attributes of another type than its op table entry declares. "
             "Fix: pass the op's attribute struct (see kiln/ops/).");
  KILN_CHECK(max_nodes_ == 0 || ++recorded_ <= max_nodes_, kTooManyNodes, " (", max_nodes_,
             ") at ", op.name, ": the forward repeats ops once per step of a dynamic size. "
             "Fix: loop over time steps with kiln::scan or kiln::fori_loop.");
  std::vector<ir::Value*> values;
  values.reserve(inputs.size());
  bool depends_on_input = false;
  for (const Tensor& t : inputs) {
    ir::Value* v = value_of(t, op);
    if (v) v = visible(v, frames_.size() - 1, op);
    values.push_back(v);
    if (v && static_cast<size_t>(v->id) < from_input_.size() && from_input_[v->id])
      depends_on_input = true;
  }
  ir::Node* node = current_graph()->add_node(op, attrs, std::move(values), types);
  node->module_path = current_module_path();
  node->loc = user_location();
  auto now = std::chrono::steady_clock::now();
  module_ms_[node->module_path] +=
      std::chrono::duration<double, std::milli>(now - last_record_).count();
  last_record_ = now;
  for (ir::Value* out : node->outputs) {
    owner_[out] = current_graph();
    from_input_.resize(static_cast<size_t>(out->id) + 1, false);
    from_input_[out->id] = depends_on_input;
  }
  return node;
}

std::vector<Shape> Tracer::view_strides(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                                        const TensorTypes& types) {
  KernelFn kernel = op.kernels[static_cast<size_t>(DeviceType::CPU)];
  if (op.lowering != LoweringClass::View || !op.kernel_makes_outputs || !kernel) return {};
  std::vector<Tensor> metadata;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      metadata.emplace_back();
      continue;
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->sizes = t.impl()->sizes;
    impl->strides = t.impl()->strides;
    impl->offset = t.impl()->offset;
    impl->dtype = t.dtype();
    impl->device = t.device();
    metadata.emplace_back(std::move(impl));
  }
  std::vector<Tensor> outs(types.size());
  KernelCall call{op, TensorSpan(metadata.data(), metadata.size()), attrs,
                  std::span<Tensor>(outs.data(), outs.size()), types};
  kernel(call);
  std::vector<Shape> strides;
  for (const Tensor& o : outs) strides.push_back(o.defined() ? Shape(o.strides()) : Shape());
  return strides;
}

Tensors Tracer::intercept(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                          TensorTypes&& output_types) {
  std::vector<ir::Type> types;
  types.reserve(output_types.size());
  for (const TensorType& t : output_types) types.push_back(ir::Type::of(t));
  std::vector<Shape> strides = view_strides(op, inputs, attrs, output_types);
  ir::Node* node = record(op, attrs, inputs, types);
  // Compiled runs draw their own random positions: the trace's draw does not count.
  if (mode_ == Mode::Trace && op.return_draw) op.return_draw(attrs, inputs);
  std::vector<ir::Value*> results = node->outputs;
  // Under NoGradGuard inside a forward traced with grad mode on, eager results carry no
  // gradient history: cut it in the graph too, since the graph runs with grad mode on.
  static const OpDef* detach_op = find_op("detach");
  if (traced_grad_mode_ && !grad_mode_enabled() && op.differentiable) {
    for (ir::Value*& v : results) {
      if (!is_floating(v->type.dtype)) continue;
      ir::Node* cut = current_graph()->add_node(*detach_op, no_attrs(), {v}, {v->type});
      cut->module_path = node->module_path;
      cut->loc = node->loc;
      owner_[cut->outputs[0]] = current_graph();
      from_input_.resize(static_cast<size_t>(cut->outputs[0]->id) + 1, false);
      from_input_[cut->outputs[0]->id] = from_input_[v->id];
      v = cut->outputs[0];
    }
  }
  Tensors out;
  for (size_t k = 0; k < results.size(); ++k)
    out.push_back(strides.empty() ? make_traced(results[k])
                                  : make_traced(results[k], strides[k], true));
  return out;
}

bool Tracer::intercept_into(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                            const Tensor& self) {
  std::vector<ir::Type> types{ir::Type::of(self)};
  std::string path = current_module_path();
  auto slot = state_slots_.find(self.impl());
  bool buffer = slot != state_slots_.end() && slot->second.kind == ir::InputKind::Buffer;
  if (const TracedValue* info = traced_info(self); info && !buffer) {
    KILN_CHECK(!self.impl()->is_view, "[trace] ", op.name,
               "_ writes in place into a view of "
               "another traced tensor, which a graph cannot express without tracking aliases. "
               "Fix: use the out-of-place form (y = x.",
               op.name, "(...)).");
    KILN_CHECK(owner_[info->value()] == current_graph(), "[trace] ", op.name,
               "_ inside a control-flow body writes in place into a tensor from outside it. "
               "Fix: return the new value from the body instead (bodies are functions of their "
               "arguments).");
    ir::Node* node = record(op, attrs, inputs, types);
    bind(self.impl_ptr(), node->outputs[0]);
    return true;
  }
  KILN_CHECK(buffer, "[trace] ", op.name, "_ in ", where_str(path), " writes in place into ",
             slot != state_slots_.end() ? "parameter '" + slot->second.path + "'"
                                        : "a tensor that is not a registered buffer",
             ": a compiled forward runs that write only once, when it is traced. Fix: register "
             "state a forward updates as a buffer (register_buffer), or use the out-of-place "
             "form.");
  KILN_CHECK(frames_.size() == 1, "[trace] ", op.name, "_ in ", where_str(path),
             " updates buffer '", slot->second.path,
             "' inside a kiln control-flow body, which "
             "is not supported. Fix: update buffers outside cond/while_loop/fori_loop/scan.");
  ir::Node* node = record(op, attrs, inputs, types);
  ir::Value* written = node->outputs[0];
  // Until the trace ends the buffer stands for its new value: ops read that value, and a
  // host read of its data is a concretization like any other traced value's.
  if (!self.is_symbolic()) shadowed_buffers_.push_back(self.impl_ptr());
  if (self.impl()->symbolic) retired_.push_back(std::move(self.impl()->symbolic));
  self.impl()->symbolic = std::make_shared<TracedValue>(state_, written);
  for (auto& [p, v] : buffer_writes_) {
    if (p == slot->second.path) {
      v = written;
      return true;
    }
  }
  buffer_writes_.emplace_back(slot->second.path, written);
  return true;
}

}  // namespace kiln::detail
