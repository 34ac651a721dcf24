// Loss primitives: negative log-likelihood over class indices (and its backward, which
// scatters into the class dim) and the two elementwise binary cross-entropies. Weights
// and reductions of the elementwise losses are applied by the frontend with kiln ops.
#pragma once

#include <string>

#include "kiln/op.h"

namespace kiln::ops {

struct NllLossAttrs : AttrsOf<NllLossAttrs> {
  int64_t ignore_index = -100;
  std::string reduction = "mean";  // "mean" (divides by the summed target weights), "sum", "none"
  template <class V>
  void fields(V& v) {
    v("ignore_index", ignore_index), v("reduction", reduction);
  }
};
// nll_loss(input, target, weight?): input [C] or [N, C, d1, ...] holds log-probabilities,
// target [] or [N, d1, ...] class indices, weight an optional [C]. The loss of one element
// is -weight[t] * input[n, t, ...] (0 where t == ignore_index).
extern OpDef nll_loss;

struct NllLossBackwardAttrs : AttrsOf<NllLossBackwardAttrs> {
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  Shape input_shape;
  template <class V>
  void fields(V& v) {
    v("ignore_index", ignore_index), v("reduction", reduction), v("input_shape", input_shape);
  }
};
// nll_loss_backward(grad, target, weight?): the gradient of nll_loss w.r.t. its input
// (zero except at each element's target class). Linear in grad.
extern OpDef nll_loss_backward;

// binary_cross_entropy(input, target): -(t log x + (1 - t) log(1 - x)) elementwise, each log
// clamped to >= -100 as in PyTorch; input and target have one shape.
extern OpDef binary_cross_entropy;

// binary_cross_entropy_with_logits(input, target, pos_weight?): the same loss on
// sigmoid(input) in the stable form (1 - t) x + (1 + (pw - 1) t) softplus(-x); pos_weight
// broadcasts against the input (e.g. [C] for an [N, C] input).
extern OpDef binary_cross_entropy_with_logits;

}  // namespace kiln::ops
