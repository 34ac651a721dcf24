// nn::Identity: returns its input (a placeholder, e.g. for a removed head).
#pragma once

#include "kiln/nn/module.h"

namespace kiln::nn {

class Identity : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
};

}  // namespace kiln::nn
