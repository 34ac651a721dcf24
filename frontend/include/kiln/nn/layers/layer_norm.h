// nn::LayerNorm: normalizes over the trailing normalized_shape dims, with an optional
// elementwise affine (weight 1, bias 0 at start), as PyTorch's.
#pragma once

#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;  // only with elementwise_affine
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, LayerNormOptions options = {});
  explicit LayerNorm(int64_t normalized_size, LayerNormOptions options = {})
      : LayerNorm(std::vector<int64_t>{normalized_size}, options) {}

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();

  std::vector<int64_t> normalized_shape;
  LayerNormOptions options;
  Tensor weight;  // normalized_shape; undefined without elementwise_affine
  Tensor bias;    // normalized_shape; undefined without elementwise_affine or bias
};

}  // namespace kiln::nn
