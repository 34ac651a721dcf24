// Definitions of layer_norm and batch_norm.
#include "kiln/ops/norm.h"

#include "kiln/ops/infer_util.h"
#include "nn_infer.h"

namespace kiln::ops {

namespace {

void infer_layer_norm(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 3, "[layer_norm] expected 3 inputs (x, weight, bias), got ",
             c.inputs.size(), ".");
  KILN_CHECK(infer::has_input(c, 0), "[layer_norm] the input is undefined.");
  infer::check_floating(c, 0);
  const auto& a = static_cast<const LayerNormAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const int64_t k = static_cast<int64_t>(a.normalized_shape.size());
  bool fits = k >= 1 && k <= x.dim();
  for (int64_t i = 0; fits && i < k; ++i) fits = x.size(x.dim() - k + i) == a.normalized_shape[i];
  KILN_CHECK(fits, "[layer_norm] normalized_shape=", shape_str(a.normalized_shape),
             " expects an input of shape [*, ", shape_str(a.normalized_shape).substr(1), ", got ",
             x.type_str(), ". Fix: normalized_shape must list the input's last dims (e.g. {",
             x.dim() ? x.size(-1) : 0, "}).");
  KILN_CHECK(a.eps >= 0, "[layer_norm] expected eps >= 0, got ", a.eps, ".");
  for (size_t i = 1; i < 3; ++i) {
    if (!infer::has_input(c, i)) continue;
    const Tensor& t = c.inputs[i];
    KILN_CHECK(Shape(t.sizes()) == a.normalized_shape, "[layer_norm] expected ",
               c.op.input_names[i], " of shape ", shape_str(a.normalized_shape),
               " (normalized_shape), got ", t.type_str(), ".");
    KILN_CHECK(t.dtype() == x.dtype(), "[layer_norm] expected ", c.op.input_names[i], " of dtype ",
               x.dtype(), ", got ", t.dtype(), ". Fix: convert it with .to(", x.dtype(), ").");
  }
  Shape stat(x.sizes());
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) stat[i] = 1;
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
  c.outputs.push_back({x.dtype(), stat, x.device()});
  c.outputs.push_back({x.dtype(), stat, x.device()});
}

void infer_batch_norm(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 5,
             "[batch_norm] expected 5 inputs (x, weight, bias, running_mean, running_var), got ",
             c.inputs.size(), ".");
  KILN_CHECK(infer::has_input(c, 0), "[batch_norm] the input is undefined.");
  infer::check_floating(c, 0);
  const auto& a = static_cast<const BatchNormAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() >= 2, "[batch_norm] expected an input [N, C] or [N, C, *], got ", x.type_str(),
             ". Fix: add a batch dim with unsqueeze(0).");
  const int64_t channels = x.size(1);
  infer::check_optional_vector(c, 1, channels, "channel");
  infer::check_optional_vector(c, 2, channels, "channel");
  infer::check_optional_vector(c, 3, channels, "channel");
  infer::check_optional_vector(c, 4, channels, "channel");
  bool has_rm = infer::has_input(c, 3), has_rv = infer::has_input(c, 4);
  KILN_CHECK(has_rm == has_rv, "[batch_norm] got ",
             has_rm ? "running_mean without running_var" : "running_var without running_mean",
             ". Fix: pass both running statistics or neither.");
  KILN_CHECK(a.eps >= 0, "[batch_norm] expected eps >= 0, got ", a.eps, ".");
  if (a.training) {
    int64_t count = x.numel() / std::max<int64_t>(channels, 1);
    KILN_CHECK(count > 1 || channels == 0,
               "[batch_norm] expected more than 1 value per channel when training, got input ",
               x.type_str(), " (", count,
               " value per channel). Fix: use a batch of 2 or more, or call it with "
               "training=false (eval()).");
  } else {
    KILN_CHECK(
        has_rm,
        "[batch_norm] evaluation mode (training=false) normalizes with the running statistics, but "
        "running_mean and running_var are undefined. Fix: pass them, or use training=true.");
  }
  Shape vec{channels};
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
  c.outputs.push_back({x.dtype(), vec, x.device()});
  c.outputs.push_back({x.dtype(), vec, x.device()});
  if (a.training && has_rm) {
    c.outputs.push_back({x.dtype(), vec, x.device()});
    c.outputs.push_back({x.dtype(), vec, x.device()});
  }
}

// Shared by the backward ops: grad and x of one shape and dtype, an optional weight, and the
// statistics of the forward with `stat` shape; the outputs are (grad_x, grad_w, grad_b).
void infer_norm_backward(InferCall& c, IntList stat, IntList param) {
  const char* op = c.op.name.c_str();
  KILN_CHECK(c.inputs.size() == 5, "[", op,
             "] expected 5 inputs (grad, x, weight, mean, rstd), got ", c.inputs.size(), ".");
  const Tensor &g = c.inputs[0], &x = c.inputs[1];
  KILN_CHECK(g.defined() && x.defined() && c.inputs[3].defined() && c.inputs[4].defined(), "[", op,
             "] grad, x, mean and rstd must be defined.");
  infer::check_floating(c, 0);
  KILN_CHECK(Shape(g.sizes()) == Shape(x.sizes()) && g.dtype() == x.dtype(), "[", op,
             "] expected grad of x's type ", x.type_str(), ", got ", g.type_str(), ".");
  for (size_t i : {2, 3, 4}) {
    const Tensor& t = c.inputs[i];
    if (!t.defined()) continue;
    Shape want(i == 2 ? param : stat);
    KILN_CHECK(Shape(t.sizes()) == want && t.dtype() == x.dtype(), "[", op, "] expected ",
               c.op.input_names[i], " of shape ", shape_str(want), " and dtype ", x.dtype(),
               ", got ", t.type_str(), ".");
  }
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
  c.outputs.push_back({x.dtype(), Shape(param), x.device()});
  c.outputs.push_back({x.dtype(), Shape(param), x.device()});
}

void infer_layer_norm_backward(InferCall& c) {
  const auto& a = static_cast<const LayerNormAttrs&>(c.attrs);
  KILN_CHECK(c.inputs.size() == 5 && c.inputs[1].defined(),
             "[layer_norm_backward] expected 5 inputs.");
  const Tensor& x = c.inputs[1];
  const int64_t k = static_cast<int64_t>(a.normalized_shape.size());
  KILN_CHECK(k >= 1 && k <= x.dim() &&
                 x.sizes().subspan(static_cast<size_t>(x.dim() - k)) == IntList(a.normalized_shape),
             "[layer_norm_backward] normalized_shape=", shape_str(a.normalized_shape),
             " does not end x ", x.type_str(), ".");
  Shape stat(x.sizes());
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) stat[i] = 1;
  infer_norm_backward(c, stat, a.normalized_shape);
}

void infer_batch_norm_backward(InferCall& c) {
  const auto& a = static_cast<const BatchNormAttrs&>(c.attrs);
  KILN_CHECK(
      a.training,
      "[batch_norm_backward] is the training-mode backward; evaluation mode is affine in x.");
  KILN_CHECK(c.inputs.size() == 5 && c.inputs[1].defined() && c.inputs[1].dim() >= 2,
             "[batch_norm_backward] expected 5 inputs with x of rank >= 2.");
  Shape vec{c.inputs[1].size(1)};
  infer_norm_backward(c, vec, vec);
}

}  // namespace

OpDef layer_norm("layer_norm", {"x", "weight", "bias"}, infer_layer_norm, LoweringClass::Composite,
                 attrs_of<LayerNormAttrs>());
OpDef batch_norm("batch_norm", {"x", "weight", "bias", "running_mean", "running_var"},
                 infer_batch_norm, LoweringClass::Composite, attrs_of<BatchNormAttrs>(),
                 {.nondiff_inputs = 0b11000 /* running statistics: buffers, not parameters */});
// The backward ops' statistics inputs take no gradient: their x-dependence is in the vjp.
OpDef layer_norm_backward("layer_norm_backward", {"grad", "x", "weight", "mean", "rstd"},
                          infer_layer_norm_backward, LoweringClass::Composite,
                          attrs_of<LayerNormAttrs>(), {.nondiff_inputs = 0b11000});
OpDef batch_norm_backward("batch_norm_backward", {"grad", "x", "weight", "mean", "invstd"},
                          infer_batch_norm_backward, LoweringClass::Composite,
                          attrs_of<BatchNormAttrs>(), {.nondiff_inputs = 0b11000});

}  // namespace kiln::ops
