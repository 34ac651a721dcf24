// nn::Linear.
#include "kiln/nn/layers/linear.h"

#include <cmath>

#include "../layer_util.h"
#include "kiln/tensor_ops/linalg.h"

namespace kiln::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features(in_features), out_features(out_features) {
  KILN_CHECK(in_features >= 0 && out_features >= 0,
             "[Linear] expected non-negative "
             "in_features and out_features, got Linear(",
             in_features, ", ", out_features, "). Fix: pass the input and output widths.");
  weight = register_parameter("weight", Tensor::empty({out_features, in_features}));
  this->bias = register_parameter("bias", bias ? Tensor::empty({out_features}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  NoGradGuard no_grad;
  // Copy into the registered tensors, so every handle to them sees the new values.
  weight.detach().copy_(detail::uniform_tensor(weight.sizes(), bound));
  if (bias.defined()) bias.detach().copy_(detail::uniform_tensor(bias.sizes(), bound));
}

Tensor Linear::forward(const Tensor& input) {
  detail::check_floating_input(input, weight.dtype(), "Linear");
  KILN_CHECK(input.dim() >= 1 && input.size(-1) == in_features,
             "[Linear] expected an input "
             "whose last dim is in_features = ",
             in_features, ", got ", input.type_str(), ". Fix: pass [..., ", in_features,
             "] inputs, or build Linear(", input.dim() >= 1 ? input.size(-1) : 0, ", ",
             out_features, ").");
  return kiln::linear(input, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + detail::bool_str(bias.defined());
}

}  // namespace kiln::nn
