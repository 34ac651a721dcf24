// nn::LayerNorm.
#include "kiln/nn/layers/layer_norm.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::nn {

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, LayerNormOptions options)
    : normalized_shape(std::move(normalized_shape)), options(options) {
  KILN_CHECK(!this->normalized_shape.empty(),
             "[LayerNorm] normalized_shape is empty. Fix: "
             "pass the trailing dims to normalize over, e.g. LayerNorm(512).");
  bool affine = options.elementwise_affine;
  weight = register_parameter("weight", affine ? kiln::ones(this->normalized_shape) : Tensor());
  bias = register_parameter(
      "bias", affine && options.bias ? kiln::zeros(this->normalized_shape) : Tensor());
}

void LayerNorm::reset_parameters() {
  NoGradGuard no_grad;
  if (weight.defined()) weight.detach().fill_(1);
  if (bias.defined()) bias.detach().zero_();
}

Tensor LayerNorm::forward(const Tensor& input) {
  detail::check_floating_input(input, weight.defined() ? weight.dtype() : kFloat32, "LayerNorm");
  return functional::layer_norm(input, normalized_shape, weight, bias, options.eps);
}

std::string LayerNorm::extra_repr() const {
  std::string shape = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return shape + ", eps=" + detail::float_str(options.eps) +
         ", elementwise_affine=" + detail::bool_str(options.elementwise_affine);
}

}  // namespace kiln::nn
