// nn::Flatten.
#include "kiln/nn/layers/flatten.h"

namespace kiln::nn {

Tensor Flatten::forward(const Tensor& input) {
  return input.flatten(start_dim, end_dim);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

}  // namespace kiln::nn
