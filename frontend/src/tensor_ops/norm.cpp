// layer_norm and batch_norm, and the vjps of the norm ops. First-order backward runs the
// fused layer_norm_backward / batch_norm_backward kernels; their own vjps (kiln ops) give
// double backward. The forward vjps also take gradients arriving at the saved statistics
// (mean, rstd/invstd), which double backward produces, so higher-order gradients are exact.
#include "kiln/ops/norm.h"

#include "../call.h"
#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  KILN_CHECK(x.defined(), "[layer_norm] the input is undefined.");
  ops::LayerNormAttrs a;
  a.normalized_shape = Shape(normalized_shape);
  a.eps = eps;
  return kiln::detail::call(ops::layer_norm, Tensors{x, weight, bias}, a)[0];
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  KILN_CHECK(x.defined(), "[batch_norm] the input is undefined.");
  ops::BatchNormAttrs a;
  a.training = training;
  a.momentum = momentum;
  a.eps = eps;
  Tensors out =
      kiln::detail::call(ops::batch_norm, Tensors{x, weight, bias, running_mean, running_var}, a);
  if (out.size() == 5) {
    // The running statistics are state, not part of the differentiated computation. The
    // copies are handles sharing the buffers' storage, so copy_ updates the caller's buffers.
    NoGradGuard no_grad;
    Tensor mean_buffer = running_mean, var_buffer = running_var;
    mean_buffer.copy_(out[3]);
    var_buffer.copy_(out[4]);
  }
  return out[0];
}

}  // namespace nn::functional

namespace {

// The dim indices [from, to).
Shape dim_range(int64_t from, int64_t to) {
  Shape d;
  for (int64_t i = from; i < to; ++i) d.push_back(i);
  return d;
}

// How a norm groups x: each statistic covers the `group` dims; the statistics broadcast
// from `stat_b`; the affine parameters have shape `param`, broadcast from `param_b` and sum
// back over `param_sum`.
struct NormLayout {
  Shape group, stat_b, param, param_b, param_sum;
  double n = 1;  // elements per group

  Tensor group_mean(const Tensor& t) const { return mean(t, group, true); }
  Tensor group_sum(const Tensor& t) const { return sum(t, group, true); }
  // An x-shaped tensor summed to the parameters' shape (kiln's sum reads {} as "all").
  Tensor to_param(const Tensor& t) const {
    return (param_sum.empty() ? t : sum(t, param_sum)).reshape(param);
  }
};

NormLayout layer_norm_layout(IntList x, IntList normalized_shape) {
  const int64_t rank = static_cast<int64_t>(x.size()),
                k = static_cast<int64_t>(normalized_shape.size());
  NormLayout L;
  L.group = dim_range(rank - k, rank);
  L.stat_b = Shape(x);
  for (int64_t d = rank - k; d < rank; ++d) L.stat_b[d] = 1;
  L.param = L.param_b = Shape(normalized_shape);
  L.param_sum = dim_range(0, rank - k);
  L.n = static_cast<double>(numel(normalized_shape));
  return L;
}

NormLayout batch_norm_layout(IntList x) {
  const int64_t rank = static_cast<int64_t>(x.size()), channels = x[1];
  NormLayout L;
  L.group = Shape{0};
  for (int64_t d = 2; d < rank; ++d) L.group.push_back(d);
  L.stat_b = Shape(static_cast<size_t>(rank), 1);
  L.stat_b[1] = channels;
  L.param = Shape{channels};
  L.param_b = L.stat_b;
  L.param_sum = L.group;
  L.n = static_cast<double>(numel(x) / std::max<int64_t>(channels, 1));
  return L;
}

Tensor add_defined(const Tensor& a, const Tensor& b) {
  return a.defined() ? (b.defined() ? a + b : a) : b;
}

// The input gradient of xhat = (x - mean) * r for an upstream u (r, xhat broadcast):
// r * (u - mean(u) - xhat * mean(u * xhat)), with the per-group factors formed on the small
// reduced tensors.
Tensor xhat_vjp(const NormLayout& L, const Tensor& u, const Tensor& xhat, const Tensor& r) {
  Tensor c1 = r * L.group_mean(u), c2 = r * L.group_mean(u * xhat);
  return u * r - (xhat * c2 + c1);
}

// Gradients that reach the statistics outputs: d mean/dx = 1/n and, through the variance,
// g_var * 2 (x - mean) / n.
Tensor stats_input_grad(const NormLayout& L, const Tensor& x, const Tensor& mean_b,
                        const Tensor& g_mean, const Tensor& g_var) {
  Tensor out;
  if (g_mean.defined()) out = expand(g_mean.reshape(L.stat_b) / L.n, x.sizes());
  if (g_var.defined()) out = add_defined(out, g_var.reshape(L.stat_b) * (x - mean_b) * (2 / L.n));
  return out;
}

Tensors vjp_layer_norm(const VjpCall& c) {
  const auto& a = static_cast<const ops::LayerNormAttrs&>(c.attrs);
  const Tensor &x = c.inputs[0], &w = c.inputs[1];
  const Tensor &mu = c.outputs[1], &rstd = c.outputs[2];
  const Tensor &g = c.grad_outputs[0], &g_mean = c.grad_outputs[1], &g_rstd = c.grad_outputs[2];
  const NormLayout L = layer_norm_layout(x.sizes(), a.normalized_shape);
  Tensor gx, gw, gb;
  if (g.defined()) {
    Tensors out = detail::call(ops::layer_norm_backward, Tensors{g, x, w, mu, rstd}, a);
    gx = out[0], gw = out[1], gb = out[2];
  }
  // d rstd / d var = -rstd^3 / 2.
  if (c.needs(0) && (g_mean.defined() || g_rstd.defined())) {
    Tensor g_var = g_rstd.defined() ? g_rstd * pow(rstd, 3) * -0.5 : Tensor();
    gx = add_defined(gx, stats_input_grad(L, x, mu, g_mean, g_var));
  }
  return Tensors{gx, w.defined() ? gw : Tensor(), gb};
}

Tensors vjp_batch_norm(const VjpCall& c) {
  const auto& a = static_cast<const ops::BatchNormAttrs&>(c.attrs);
  const Tensor &x = c.inputs[0], &w = c.inputs[1];
  const Tensor &mu = c.outputs[1], &invstd = c.outputs[2];
  const Tensor& g = c.grad_outputs[0];
  const NormLayout L = batch_norm_layout(x.sizes());
  Tensor gx, gw, gb;
  if (!a.training) {
    // The running statistics are constants: out is affine in x.
    if (g.defined()) {
      Tensor invstd_b = invstd.reshape(L.stat_b);
      if (c.needs(0)) gx = g * (w.defined() ? (w * invstd).reshape(L.stat_b) : invstd_b);
      if (c.needs(1)) gw = L.to_param(g * (x - mu.reshape(L.stat_b)) * invstd_b);
      if (c.needs(2)) gb = L.to_param(g);
    }
    return Tensors{gx, gw, gb, Tensor(), Tensor()};
  }
  if (g.defined()) {
    Tensors out = detail::call(ops::batch_norm_backward, Tensors{g, x, w, mu, invstd}, a);
    gx = out[0], gw = out[1], gb = out[2];
  }
  // Gradients at the statistics outputs: the batch mean (outputs 1 and 3) and, through invstd
  // (output 2) and the unbiased variance (output 4), the batch variance.
  auto grad_at = [&](size_t i) { return i < c.grad_outputs.size() ? c.grad_outputs[i] : Tensor(); };
  Tensor g_mean = grad_at(1), g_var;
  if (grad_at(3).defined()) g_mean = add_defined(g_mean, grad_at(3) * a.momentum);
  if (grad_at(2).defined()) g_var = grad_at(2) * pow(invstd, 3) * -0.5;
  if (grad_at(4).defined()) g_var = add_defined(g_var, grad_at(4) * (a.momentum * L.n / (L.n - 1)));
  if (c.needs(0) && (g_mean.defined() || g_var.defined()))
    gx = add_defined(gx, stats_input_grad(L, x, mu.reshape(L.stat_b), g_mean, g_var));
  return Tensors{gx, w.defined() ? gw : Tensor(), gb, Tensor(), Tensor()};
}

// The vjp of layer_norm_backward / batch_norm_backward: (gx, gw, gb) = J^T g of
// out = xhat * w + b, so for upstream (ax, aw, ab):
//   d/dg = w * P(ax) + aw * xhat + ab, with P = xhat_vjp (self-adjoint);
//   d/dw = sum(g * P(ax));
//   d/dx = -(r xhat / n) S(ax * gx) - (r / n) (S(gy * xhat) P(ax) + S(ax * xhat) gx) + P(aw * g),
// where gy = g * w, S sums over each group and r = rstd; the first two terms differentiate
// <ax, P(gy)> through r and xhat (the statistics are functions of x).
Tensors vjp_norm_backward(const VjpCall& c, const NormLayout& L) {
  const Tensor &g = c.inputs[0], &x = c.inputs[1], &w = c.inputs[2];
  const Tensor mu = c.inputs[3].reshape(L.stat_b), r = c.inputs[4].reshape(L.stat_b);
  const Tensor& gx = c.outputs[0];
  const Tensor &ax = c.grad_outputs[0], &aw = c.grad_outputs[1], &ab = c.grad_outputs[2];
  const Tensor xhat = (x - mu) * r;
  const Tensor wb = w.defined() ? w.reshape(L.param_b) : Tensor();
  Tensor dg, dx, dw;
  if (ax.defined()) {
    Tensor pax = xhat_vjp(L, ax, xhat, r);
    if (c.needs(0)) dg = wb.defined() ? wb * pax : pax;
    if (c.needs(1)) {
      Tensor gy = wb.defined() ? g * wb : g;
      Tensor t1 = r * xhat * (L.group_sum(ax * gx) / -L.n);
      Tensor t2 = (r / -L.n) * (L.group_sum(gy * xhat) * pax + L.group_sum(ax * xhat) * gx);
      dx = t1 + t2;
    }
    if (c.needs(2) && w.defined()) dw = L.to_param(g * pax);
  }
  if (aw.defined()) {
    Tensor awb = aw.reshape(L.param_b);
    if (c.needs(0)) dg = add_defined(dg, awb * xhat);
    if (c.needs(1)) dx = add_defined(dx, xhat_vjp(L, awb * g, xhat, r));
  }
  if (ab.defined() && c.needs(0)) dg = add_defined(dg, expand(ab.reshape(L.param_b), x.sizes()));
  return Tensors{dg, dx, dw, Tensor(), Tensor()};
}

Tensors vjp_layer_norm_backward(const VjpCall& c) {
  const auto& a = static_cast<const ops::LayerNormAttrs&>(c.attrs);
  return vjp_norm_backward(c, layer_norm_layout(c.input_types[1].shape, a.normalized_shape));
}

Tensors vjp_batch_norm_backward(const VjpCall& c) {
  return vjp_norm_backward(c, batch_norm_layout(c.input_types[1].shape));
}

}  // namespace

namespace detail {
void register_norm_vjps() {
  // The vjps read x and weight plus the saved statistics (outputs 1 and 2); the backward
  // ops' vjps reuse grad_x.
  set_vjp(ops::layer_norm, vjp_layer_norm, {.inputs = 0b011, .outputs = 0b110});
  set_vjp(ops::batch_norm, vjp_batch_norm, {.inputs = 0b011, .outputs = 0b110});
  set_vjp(ops::layer_norm_backward, vjp_layer_norm_backward, {.outputs = 0b001});
  set_vjp(ops::batch_norm_backward, vjp_batch_norm_backward, {.outputs = 0b001});
}
}  // namespace detail

}  // namespace kiln
