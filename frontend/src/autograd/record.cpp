// The autograd hook dispatch calls after a kernel ran on inputs that require grad: it
// builds the op's node (saving what the vjp reads) and makes the outputs point at it.
#include <atomic>

#include "kiln/autograd.h"
#include "kiln/dispatch.h"
#include "record.h"

namespace kiln::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{1};

void record(const OpDef& op, TensorSpan inputs, const Attrs& attrs, std::span<Tensor> outputs) {
  bool any_float_output = false;
  for (const Tensor& o : outputs) any_float_output |= o.defined() && is_floating(o.dtype());
  if (!any_float_output) return;  // comparisons, argmax, ...: nothing to differentiate

  auto node = std::make_shared<OpNode>(op, attrs.clone());
  node->next_edges.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    bool differentiable = t.defined() && !((op.nondiff_inputs >> i) & 1) && is_floating(t.dtype()) && t.requires_grad();
    node->next_edges.push_back(differentiable ? gradient_edge(t) : Edge{});
    if (differentiable) node->needs_input_grad |= uint64_t{1} << i;
    node->input_types.push_back(t.defined() ? TensorType{t.dtype(), Shape(t.sizes()), t.device()} : TensorType{});
    node->saved_inputs.push_back((op.saves_inputs >> i) & 1 && t.defined() ? SavedTensor(t, false) : SavedTensor());
  }
  node->sequence_nr = g_next_sequence_nr.fetch_add(1);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& o = outputs[i];
    node->output_types.push_back({o.dtype(), Shape(o.sizes()), o.device()});
    if (!is_floating(o.dtype())) continue;
    auto& meta = o.impl()->autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    node->saved_outputs.push_back((op.saves_outputs >> i) & 1 ? SavedTensor(outputs[i], true) : SavedTensor());
}
}  // namespace

void install_autograd_hook() { set_autograd_hook(record); }

uint64_t next_sequence_nr() { return g_next_sequence_nr.fetch_add(1); }

}  // namespace kiln::autograd
