// Autograd nodes: saved-tensor checks, running an op's vjp, accumulating into leaves.
#include "kiln/autograd/node.h"

#include "kiln/autograd.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::autograd {

namespace {
// A tensor sharing t's data and geometry but none of its autograd state.
Tensor bare_alias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& src = *t.impl();
  impl->storage = src.storage;
  impl->sizes = src.sizes;
  impl->strides = src.strides;
  impl->offset = src.offset;
  impl->dtype = src.dtype;
  impl->device = src.device;
  impl->is_view = src.is_view;
  impl->symbolic = src.symbolic;
  return Tensor(std::move(impl));
}
}  // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output)
    : data_(is_output ? bare_alias(t) : t), version_(t.version()), is_output_(is_output) {
  if (is_output && t.impl()->autograd) {
    output_nr_ = t.impl()->autograd->output_nr;
    requires_grad_ = t.requires_grad();
  }
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner, const char* op, size_t index, bool is_input) const {
  KILN_CHECK(data_.defined(), "[autograd] the tensors saved by '", op, "' were freed by an earlier "
             "backward. Fix: pass retain_graph=true to the first backward() if you need to backward "
             "through the graph again.");
  KILN_CHECK(data_.version() == version_, "[autograd] ", is_input ? "input " : "output ", index, " of '", op,
             "' (", data_.type_str(), ") was needed for the gradient but was modified in place after "
             "it was used (version ", version_, " -> ", data_.version(), "). Fix: clone() it before the "
             "in-place op, or use the out-of-place form (x = x + y instead of x.add_(y)).");
  if (!is_output_ || !requires_grad_) return data_;
  Tensor t = bare_alias(data_);
  auto& meta = t.impl()->autograd_meta();
  meta.grad_fn = owner;
  meta.output_nr = output_nr_;
  return t;
}

std::string OpNode::name() const {
  std::string n = op_.name;
  n[0] = static_cast<char>(std::toupper(n[0]));
  return n + "Backward";
}

void OpNode::release() {
  released_ = true;
  for (auto& s : saved_inputs) s.reset();
  for (auto& s : saved_outputs) s.reset();
}

Tensors OpNode::apply(Tensors&& grads) {
  KILN_CHECK(!released_, "[autograd] backward ran through '", op_.name, "' a second time, but its saved "
             "tensors were freed after the first backward. Fix: pass retain_graph=true to the first "
             "backward() (or BackwardOptions{.retain_graph = true}).");
  KILN_CHECK(op_.vjp, "[autograd] op '", op_.name, "' has no gradient rule (vjp). Fix: detach() its inputs "
             "or compute this value under kiln::NoGradGuard.");
  auto self = shared_from_this();
  Tensors inputs, outputs;
  for (size_t i = 0; i < saved_inputs.size(); ++i)
    inputs.push_back(saved_inputs[i].defined() ? saved_inputs[i].unpack(self, op_.name.c_str(), i, true) : Tensor());
  for (size_t i = 0; i < saved_outputs.size(); ++i)
    outputs.push_back(saved_outputs[i].defined() ? saved_outputs[i].unpack(self, op_.name.c_str(), i, false) : Tensor());
  VjpCall call{op_, inputs, input_types, outputs, *attrs_, grads, needs_input_grad};
  Tensors result = op_.vjp(call);
  KILN_CHECK(result.size() == next_edges.size(), "[autograd] the vjp of '", op_.name, "' returned ",
             result.size(), " gradients for ", next_edges.size(), " inputs.");
  for (size_t i = 0; i < result.size(); ++i) {
    if (!result[i].defined() || !call.needs(i)) {
      result[i] = Tensor();
      continue;
    }
    const TensorType& want = input_types[i];
    KILN_CHECK(Shape(result[i].sizes()) == want.shape, "[autograd] the vjp of '", op_.name, "' returned a ",
               shape_str(result[i].sizes()), " gradient for input ", i, " of shape ", shape_str(want.shape), ".");
    if (result[i].dtype() != want.dtype) result[i] = result[i].to(want.dtype);
  }
  return result;
}

Tensors AccumulateGrad::apply(Tensors&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  Tensor leaf(leaf_);
  Tensor current = leaf.grad();
  if (!current.defined()) {
    // Keep the graph of g only when it is being recorded (create_graph); a plain backward
    // stores a tensor that owns its memory, so later in-place accumulation is safe.
    bool sole_owner = g.impl_ptr().use_count() == 1 && !g.requires_grad() && !g.impl()->is_view &&
                      g.is_contiguous() && g.impl()->storage.use_count() == 1;
    if (is_grad_enabled() || sole_owner) {
      leaf.set_grad(g);
    } else {
      leaf.set_grad(g.detach().clone());
    }
  } else if (is_grad_enabled()) {
    leaf.set_grad(current + g);
  } else {
    current.add_(g);
  }
  // A hook may remove itself (or others): run over a copy.
  if (!post_hooks.empty()) {
    std::vector<PostHook> hooks = post_hooks;
    for (const PostHook& hook : hooks) hook.fn(leaf);
  }
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.impl()->autograd) return {};
  AutogradMeta& meta = *t.impl()->autograd;
  if (meta.grad_fn) return {meta.grad_fn, meta.output_nr};
  if (!meta.requires_grad) return {};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->output_types.push_back({t.dtype(), Shape(t.sizes()), t.device()});
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

}  // namespace kiln::autograd
