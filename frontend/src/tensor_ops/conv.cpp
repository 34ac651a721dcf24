// conv2d (numeric or "same"/"valid" padding) and the vjps of conv2d and its gradient ops.
// All three ops are bilinear, so each vjp is made of the other two (and conv2d itself).
#include "kiln/ops/conv.h"

#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"
#include "nn_util.h"

namespace kiln {

namespace {

ops::Conv2dAttrs conv_attrs(IntList stride, IntList padding, IntList dilation, int64_t groups) {
  ops::Conv2dAttrs a;
  a.stride = detail::nn_pair(stride, "stride", "conv2d");
  a.padding = detail::nn_pair(padding, "padding", "conv2d");
  a.dilation = detail::nn_pair(dilation, "dilation", "conv2d");
  a.groups = groups;
  return a;
}

ops::Conv2dGradAttrs grad_attrs(const ops::Conv2dAttrs& a, IntList size) {
  ops::Conv2dGradAttrs g;
  g.stride = a.stride, g.padding = a.padding, g.dilation = a.dilation, g.groups = a.groups;
  g.size = Shape(size);
  return g;
}

ops::Conv2dAttrs forward_attrs(const ops::Conv2dGradAttrs& g) {
  ops::Conv2dAttrs a;
  a.stride = g.stride, a.padding = g.padding, a.dilation = g.dilation, a.groups = g.groups;
  return a;
}

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, const ops::Conv2dAttrs& a) {
  return detail::with_batch_dim(x, "conv2d", [&](const Tensor& x4, bool unbatched) {
    Tensor y = detail::call1(ops::conv2d, {x4, w, b}, a);
    return unbatched ? y.squeeze(0) : y;
  });
}

}  // namespace

namespace nn::functional {

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  KILN_CHECK(weight.defined(), "[conv2d] the weight is undefined.");
  return conv(x, weight, bias, conv_attrs(stride, padding, dilation, groups));
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
              PaddingMode padding, IntList dilation, int64_t groups) {
  const std::string_view mode = padding.name;
  KILN_CHECK(mode == "same" || mode == "valid",
             "[conv2d] expected padding \"same\" or \"valid\" (or numbers), "
             "got \"",
             mode, "\".");
  ops::Conv2dAttrs a = conv_attrs(stride, {0}, dilation, groups);
  if (mode == "valid") return conv(x, weight, bias, a);
  KILN_CHECK(a.stride[0] == 1 && a.stride[1] == 1,
             "[conv2d] padding=\"same\" needs stride 1, got stride=", shape_str(a.stride),
             ". Fix: pass the padding as numbers for strided convolutions.");
  KILN_CHECK(weight.defined() && weight.dim() == 4, "[conv2d] expected a 4-D weight, got ",
             weight.defined() ? weight.type_str() : "undefined", ".");
  // Total padding d (k - 1) per dim: half on each side, the odd one out on the right/bottom.
  Shape extra{0, 0, 0, 0};  // (left, right, top, bottom) for pad()
  bool asymmetric = false;
  for (int i = 0; i < 2; ++i) {
    int64_t total = a.dilation[i] * (weight.size(2 + i) - 1);
    a.padding[i] = total / 2;
    if (total % 2) {
      extra[2 * (1 - i) + 1] = 1;
      asymmetric = true;
    }
  }
  return conv(asymmetric ? pad(x, extra) : x, weight, bias, a);
}

}  // namespace nn::functional

namespace {

Tensors vjp_conv2d(const VjpCall& c) {
  const auto& a = static_cast<const ops::Conv2dAttrs&>(c.attrs);
  const Tensor &x = c.inputs[0], &w = c.inputs[1], &g = c.grad_outputs[0];
  Tensor gx, gw, gb;
  if (c.needs(0))
    gx = detail::call1(ops::conv2d_input_grad, {g, w}, grad_attrs(a, c.input_types[0].shape));
  if (c.needs(1))
    gw = detail::call1(ops::conv2d_weight_grad, {g, x}, grad_attrs(a, c.input_types[1].shape));
  if (c.needs(2)) gb = sum(g, {0, 2, 3});
  return Tensors{gx, gw, gb};
}

// input_grad(g, w) = A_w^T g, so <gg, A_w^T g> gives d/dg = conv2d(gg, w), d/dw = weight_grad(g,
// gg).
Tensors vjp_conv2d_input_grad(const VjpCall& c) {
  const auto& a = static_cast<const ops::Conv2dGradAttrs&>(c.attrs);
  const Tensor &g = c.inputs[0], &w = c.inputs[1], &gg = c.grad_outputs[0];
  Tensor dg, dw;
  if (c.needs(0)) dg = detail::call1(ops::conv2d, {gg, w, Tensor()}, forward_attrs(a));
  if (c.needs(1))
    dw = detail::call1(ops::conv2d_weight_grad, {g, gg}, grad_attrs(forward_attrs(a), w.sizes()));
  return Tensors{dg, dw};
}

// weight_grad(g, x) = d<conv2d(x, w), g>/dw: d/dg = conv2d(x, gg), d/dx = input_grad(g, gg).
Tensors vjp_conv2d_weight_grad(const VjpCall& c) {
  const auto& a = static_cast<const ops::Conv2dGradAttrs&>(c.attrs);
  const Tensor &g = c.inputs[0], &x = c.inputs[1], &gg = c.grad_outputs[0];
  Tensor dg, dx;
  if (c.needs(0)) dg = detail::call1(ops::conv2d, {x, gg, Tensor()}, forward_attrs(a));
  if (c.needs(1))
    dx = detail::call1(ops::conv2d_input_grad, {g, gg}, grad_attrs(forward_attrs(a), x.sizes()));
  return Tensors{dg, dx};
}

}  // namespace

namespace detail {
void register_conv_vjps() {
  // The bias gradient needs only grad.
  set_vjp(ops::conv2d, vjp_conv2d, {.inputs = 0b011});
  set_vjp(ops::conv2d_input_grad, vjp_conv2d_input_grad);
  set_vjp(ops::conv2d_weight_grad, vjp_conv2d_weight_grad);
}
}  // namespace detail

}  // namespace kiln
