// Definitions of the loss ops.
#include "kiln/ops/loss.h"

#include "scalar_bodies.h"

#include "kiln/ops/infer_util.h"
#include "nn_infer.h"

namespace kiln::ops {

namespace {

// The target shape nll_loss expects for `input`: [] for [C], [N, d1, ...] for [N, C, d1, ...].
Shape nll_target_shape(IntList input) {
  Shape s;
  if (input.size() == 1) return s;
  for (size_t d = 0; d < input.size(); ++d)
    if (d != 1) s.push_back(input[d]);
  return s;
}

void check_nll_inputs(const InferCall& c, IntList input_shape, const char* input_what) {
  KILN_CHECK(input_shape.size() >= 1, "[", c.op.name, "] expected ", input_what,
             " of shape [C] or [N, C, d1, ...], got a 0-d tensor. Fix: pass log-probabilities with "
             "a class dim.");
  infer::check_index_tensor(c, 1);
  const Tensor& target = c.inputs[1];
  Shape want = nll_target_shape(input_shape);
  KILN_CHECK(Shape(target.sizes()) == want, "[", c.op.name, "] expected target of shape ",
             shape_str(want), " (the input ", shape_str(input_shape), " without its class dim ",
             input_shape.size() == 1 ? 0 : 1, "), got ", target.type_str(),
             ". Fix: pass one class index per sample (not one-hot vectors; "
             "for class probabilities use cross_entropy with a floating target).");
  int64_t classes = input_shape.size() == 1 ? input_shape[0] : input_shape[1];
  infer::check_optional_vector(c, 2, classes, "class weight");
}

void infer_nll_loss(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 3, "[nll_loss] expected 3 inputs (input, target, weight), got ",
             c.inputs.size(), ".");
  KILN_CHECK(infer::has_input(c, 0), "[nll_loss] the input is undefined.");
  infer::check_floating(c, 0);
  const auto& a = static_cast<const NllLossAttrs&>(c.attrs);
  infer::check_reduction(c, a.reduction);
  const Tensor& x = c.inputs[0];
  check_nll_inputs(c, x.sizes(), "input (log-probabilities)");
  Shape out = a.reduction == "none" ? Shape(c.inputs[1].sizes()) : Shape{};
  c.outputs.push_back({x.dtype(), out, x.device()});
}

void infer_nll_loss_backward(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 3,
             "[nll_loss_backward] expected 3 inputs (grad, target, weight), got ", c.inputs.size(),
             ".");
  KILN_CHECK(infer::has_input(c, 0), "[nll_loss_backward] the gradient is undefined.");
  infer::check_floating(c, 0);
  const auto& a = static_cast<const NllLossBackwardAttrs&>(c.attrs);
  infer::check_reduction(c, a.reduction);
  check_nll_inputs(c, a.input_shape, "input_shape");
  const Tensor& g = c.inputs[0];
  Shape want = a.reduction == "none" ? Shape(c.inputs[1].sizes()) : Shape{};
  KILN_CHECK(Shape(g.sizes()) == want, "[nll_loss_backward] expected a gradient of shape ",
             shape_str(want), ", got ", g.type_str(), ".");
  c.outputs.push_back({g.dtype(), a.input_shape, g.device()});
}

void infer_bce(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_floating(c, 0);
  infer::check_same_dtype(c);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(Shape(c.inputs[1].sizes()) == Shape(x.sizes()), "[", c.op.name,
             "] expected target of the input's shape ", shape_str(x.sizes()), ", got ",
             c.inputs[1].type_str(),
             ". Fix: give one target per input element "
             "(reshape or expand the target).");
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

void infer_bce_with_logits(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 3, "[", c.op.name,
             "] expected 3 inputs (input, target, pos_weight), got ", c.inputs.size(), ".");
  KILN_CHECK(infer::has_input(c, 0) && infer::has_input(c, 1), "[", c.op.name,
             "] input and target must be defined.");
  infer::check_floating(c, 0);
  const Tensor& x = c.inputs[0];
  for (size_t i = 1; i < 3; ++i) {
    if (!infer::has_input(c, i)) continue;
    KILN_CHECK(c.inputs[i].dtype() == x.dtype(), "[", c.op.name, "] expected ", c.op.input_names[i],
               " of dtype ", x.dtype(), " (the input's), got ", c.inputs[i].dtype(),
               ". Fix: convert it with .to(", x.dtype(), ").");
  }
  KILN_CHECK(Shape(c.inputs[1].sizes()) == Shape(x.sizes()), "[", c.op.name,
             "] expected target of the input's shape ", shape_str(x.sizes()), ", got ",
             c.inputs[1].type_str(), ". Fix: give one target per input element.");
  if (infer::has_input(c, 2)) {
    const Tensor& pw = c.inputs[2];
    Shape b = broadcast_shapes(x.sizes(), pw.sizes(), c.op.name.c_str());
    KILN_CHECK(
        b == Shape(x.sizes()), "[", c.op.name, "] pos_weight ", pw.type_str(),
        " must broadcast to the input ", x.type_str(),
        " without enlarging it. Fix: pass one weight per class, shape [C] for an [N, C] input.");
  }
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

}  // namespace

OpDef nll_loss("nll_loss", {"input", "target", "weight"}, infer_nll_loss, LoweringClass::Opaque,
               attrs_of<NllLossAttrs>(), {.nondiff_inputs = 0b110});
OpDef nll_loss_backward("nll_loss_backward", {"grad", "target", "weight"}, infer_nll_loss_backward,
                        LoweringClass::Opaque, attrs_of<NllLossBackwardAttrs>(),
                        {.nondiff_inputs = 0b110});
// Opaque, not Elementwise: its kernel refuses inputs outside [0, 1], a check on the data
// that a fused kernel could only turn into NaN.
OpDef binary_cross_entropy("binary_cross_entropy", {"input", "target"}, infer_bce,
                           LoweringClass::Opaque);
OpDef binary_cross_entropy_with_logits(
    "binary_cross_entropy_with_logits", {"input", "target", "pos_weight"}, infer_bce_with_logits,
    LoweringClass::Elementwise,
    {.scalar_body = scalar_bodies::binary_cross_entropy_with_logits,
     .numerics = Numerics::Approximate});

}  // namespace kiln::ops
