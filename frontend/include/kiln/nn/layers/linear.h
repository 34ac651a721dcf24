// nn::Linear: y = x W^T + b, with PyTorch's initialization (W and b uniform in
// +-1/sqrt(in_features), i.e. kaiming_uniform(a=sqrt(5)) and the fan-in bias bound).
#pragma once

#include "kiln/nn/module.h"

namespace kiln::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  // Redraws weight and bias from kiln::default_generator().
  void reset_parameters();

  int64_t in_features;
  int64_t out_features;
  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features]; undefined when bias = false
};

}  // namespace kiln::nn
