// Normalization primitives with fused forward kernels: layer_norm and batch_norm. Both
// return the statistics they normalized with, which their vjps read.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct LayerNormAttrs : AttrsOf<LayerNormAttrs> {
  Shape normalized_shape;  // the trailing dims of x that are normalized together
  double eps = 1e-5;
  template <class V>
  void fields(V& v) {
    v("normalized_shape", normalized_shape), v("eps", eps);
  }
};
// layer_norm(x, weight?, bias?) -> (out, mean, rstd). weight and bias have
// normalized_shape; mean and rstd = 1/sqrt(var + eps) (biased variance) have x's shape with
// the normalized dims set to 1.
extern OpDef layer_norm;

struct BatchNormAttrs : AttrsOf<BatchNormAttrs> {
  bool training = false;
  double momentum = 0.1;
  double eps = 1e-5;
  template <class V>
  void fields(V& v) {
    v("training", training), v("momentum", momentum), v("eps", eps);
  }
};
// batch_norm(x, weight?, bias?, running_mean?, running_var?) over x [N, C, *] per channel.
// Training: normalizes with the batch statistics and returns (out, save_mean, save_invstd,
// new_running_mean, new_running_var) — the last two only when running stats are given,
// updated with `momentum` and the unbiased batch variance. The op is functional: the
// frontend writes the new running stats into the buffers. Eval: normalizes with the running
// stats and returns (out, running_mean, 1/sqrt(running_var + eps)).
extern OpDef batch_norm;

// The fused first-order backward of the two norms (training statistics):
// layer_norm_backward(grad, x, weight?, mean, rstd) with LayerNormAttrs and
// batch_norm_backward(grad, x, weight?, save_mean, save_invstd) with BatchNormAttrs
// (training) both return (grad_x, grad_weight, grad_bias); grad_weight and grad_bias are
// computed even without a weight (as for a weight of ones). mean and rstd are the forward's
// outputs, read as cached functions of x: no gradient flows into them, and the vjps (written
// with kiln ops, for double backward) account for their dependence on x.
extern OpDef layer_norm_backward;
extern OpDef batch_norm_backward;

}  // namespace kiln::ops
