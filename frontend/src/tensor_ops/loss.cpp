// Loss functions (nll_loss, cross_entropy, mse_loss, l1_loss and the binary cross-entropies)
// and the vjps of the loss ops.
#include "kiln/ops/loss.h"

#include <cmath>

#include "../call.h"
#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/embedding.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

namespace {

ops::NllLossAttrs nll_attrs(int64_t ignore_index, const std::string& reduction) {
  ops::NllLossAttrs a;
  a.ignore_index = ignore_index;
  a.reduction = reduction;
  return a;
}

// cross_entropy with class-probability targets: -sum_c w_c t_c log p_c per sample.
Tensor cross_entropy_probs(const Tensor& lp, const Tensor& target, const CrossEntropyOptions& o,
                           int64_t class_dim) {
  KILN_CHECK(Shape(target.sizes()) == Shape(lp.sizes()),
             "[cross_entropy] expected class probabilities of the input's "
             "shape ",
             shape_str(lp.sizes()), ", got ", target.type_str(),
             ". Fix: pass int64 class indices, or one "
             "probability per class.");
  const int64_t classes = lp.size(class_dim);
  Tensor t = o.label_smoothing > 0 ? target * (1 - o.label_smoothing) + o.label_smoothing / classes
                                   : target;
  Tensor prod = lp * t;
  if (o.weight.defined()) {
    Shape bshape(static_cast<size_t>(lp.dim()), 1);
    bshape[class_dim] = classes;
    prod = prod * o.weight.reshape(bshape);
  }
  Tensor per_sample = -sum(prod, {class_dim});
  if (o.reduction == "none") return per_sample;
  if (o.reduction == "sum") return per_sample.sum();
  // The mean is over samples (numel / C), whatever the weights.
  return per_sample.sum() / static_cast<double>(classes == 0 ? 0 : lp.numel() / classes);
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& o) {
  KILN_CHECK(input.defined() && target.defined(), "[nll_loss] input and target must be defined.");
  return kiln::detail::call1(ops::nll_loss, {input, target, o.weight},
                             nll_attrs(o.ignore_index, o.reduction));
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  KILN_CHECK(input.defined() && target.defined(),
             "[cross_entropy] input and target must be defined.");
  kiln::detail::nn_check_reduction(o.reduction, "cross_entropy");
  KILN_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
             "[cross_entropy] expected label_smoothing in [0, 1], got ", o.label_smoothing, ".");
  KILN_CHECK(input.dim() >= 1,
             "[cross_entropy] expected input of shape [C] or [N, C, d1, ...], got ",
             input.type_str(), ".");
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  Tensor lp = log_softmax(input, class_dim);
  if (target.is_floating_point()) return cross_entropy_probs(lp, target, o, class_dim);

  Tensor nll = nll_loss(lp, target, {o.weight, o.ignore_index, o.reduction});
  if (o.label_smoothing == 0) return nll;
  // Label smoothing adds eps/C times the loss against the uniform distribution:
  // -sum_c w_c log p_c per counted sample, normalized like the nll term.
  const int64_t classes = input.size(class_dim);
  Tensor smooth;
  if (o.weight.defined()) {
    Shape bshape(static_cast<size_t>(lp.dim()), 1);
    bshape[class_dim] = classes;
    smooth = -sum(lp * o.weight.reshape(bshape), {class_dim});
  } else {
    smooth = -sum(lp, {class_dim});
  }
  Tensor ignored = target == o.ignore_index;
  smooth = where(ignored, 0.0, smooth);
  Tensor reduced;
  if (o.reduction == "none") {
    reduced = smooth;
  } else if (o.reduction == "sum") {
    reduced = smooth.sum();
  } else if (o.weight.defined()) {
    // Divided by the summed weights of the counted targets, as nll_loss's mean is.
    Tensor safe = where(ignored, 0, target);
    Tensor target_weight =
        kiln::detail::call1(ops::embedding, {o.weight.reshape({classes, 1}), safe},
                            ops::EmbeddingAttrs())
            .squeeze(-1);
    reduced = smooth.sum() / where(ignored, 0.0, target_weight).sum();
  } else {
    reduced = smooth.sum() / (!ignored).sum().to(smooth.dtype());
  }
  return nll * (1 - o.label_smoothing) +
         reduced * (o.label_smoothing / static_cast<double>(classes));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  KILN_CHECK(input.defined() && target.defined(), "[mse_loss] input and target must be defined.");
  return kiln::detail::nn_reduce(square(input - target), reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  KILN_CHECK(input.defined() && target.defined(), "[l1_loss] input and target must be defined.");
  return kiln::detail::nn_reduce(abs(input - target), reduction, "l1_loss");
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  KILN_CHECK(input.defined() && target.defined(),
             "[binary_cross_entropy] input and target must be defined.");
  kiln::detail::nn_check_reduction(reduction, "binary_cross_entropy");
  Tensor loss = kiln::detail::call1(ops::binary_cross_entropy, {input, target});
  if (weight.defined()) loss = loss * weight;
  return kiln::detail::nn_reduce(loss, reduction, "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const std::string& reduction,
                                        const Tensor& pos_weight) {
  KILN_CHECK(input.defined() && target.defined(),
             "[binary_cross_entropy_with_logits] input and target must be defined.");
  kiln::detail::nn_check_reduction(reduction, "binary_cross_entropy_with_logits");
  Tensor loss =
      kiln::detail::call1(ops::binary_cross_entropy_with_logits, {input, target, pos_weight});
  if (weight.defined()) loss = loss * weight;
  return kiln::detail::nn_reduce(loss, reduction, "binary_cross_entropy_with_logits");
}

}  // namespace nn::functional

namespace {

Tensors vjp_nll_loss(const VjpCall& c) {
  const auto& a = static_cast<const ops::NllLossAttrs&>(c.attrs);
  ops::NllLossBackwardAttrs b;
  b.ignore_index = a.ignore_index;
  b.reduction = a.reduction;
  b.input_shape = c.input_types[0].shape;
  return Tensors{
      detail::call1(ops::nll_loss_backward, {c.grad_outputs[0], c.inputs[1], c.inputs[2]}, b),
      Tensor(), Tensor()};
}

// nll_loss_backward is linear in grad; its adjoint is nll_loss itself.
Tensors vjp_nll_loss_backward(const VjpCall& c) {
  const auto& b = static_cast<const ops::NllLossBackwardAttrs&>(c.attrs);
  return Tensors{detail::call1(ops::nll_loss, {c.grad_outputs[0], c.inputs[1], c.inputs[2]},
                               nn::functional::nll_attrs(b.ignore_index, b.reduction)),
                 Tensor(), Tensor()};
}

// softplus(-x) = log(1 + exp(-x)), stable for either sign.
Tensor softplus_neg(const Tensor& x) {
  return relu(-x) + log1p(exp(-abs(x)));
}

Tensors vjp_bce(const VjpCall& c) {
  const Tensor &x = c.inputs[0], &t = c.inputs[1], &g = c.grad_outputs[0];
  Tensor gx, gt;
  // PyTorch's rule: (x - t) / max(x (1 - x), 1e-12).
  if (c.needs(0)) gx = g * (x - t) / clamp(x * (1 - x), 1e-12, std::nullopt);
  if (c.needs(1))
    gt = g * (clamp(log(1 - x), -100, std::nullopt) - clamp(log(x), -100, std::nullopt));
  return Tensors{gx, gt};
}

Tensors vjp_bce_with_logits(const VjpCall& c) {
  const Tensor &x = c.inputs[0], &t = c.inputs[1], &pw = c.inputs[2], &g = c.grad_outputs[0];
  Tensor gx, gt, gpw;
  if (pw.defined()) {
    // loss = (1 - t) x + (1 + (pw - 1) t) softplus(-x)
    if (c.needs(0)) gx = g * (sigmoid(x) * (pw * t + 1 - t) - pw * t);
    if (c.needs(1)) gt = g * ((pw - 1) * softplus_neg(x) - x);
    if (c.needs(2)) gpw = sum_to(g * t * softplus_neg(x), c.input_types[2].shape);
  } else {
    if (c.needs(0)) gx = g * (sigmoid(x) - t);
    if (c.needs(1)) gt = -(g * x);
  }
  return Tensors{gx, gt, gpw};
}

}  // namespace

namespace detail {
void register_loss_vjps() {
  // The class weights take no gradient (as in PyTorch); targets are indices.
  set_vjp(ops::nll_loss, vjp_nll_loss, {.inputs = 0b110});
  set_vjp(ops::nll_loss_backward, vjp_nll_loss_backward, {.inputs = 0b110});
  set_vjp(ops::binary_cross_entropy, vjp_bce);
  set_vjp(ops::binary_cross_entropy_with_logits, vjp_bce_with_logits);
}
}  // namespace detail

}  // namespace kiln
