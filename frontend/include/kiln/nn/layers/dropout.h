// nn::Dropout: zeroes elements with probability p while training (scaling the rest by
// 1 / (1 - p)), drawing from kiln::default_generator(); the identity after eval().
#pragma once

#include "kiln/nn/module.h"

namespace kiln::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  double p;
};

}  // namespace kiln::nn
