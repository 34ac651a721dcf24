// nn::Flatten: merges dims start_dim..end_dim (default: all but the batch dim).
#pragma once

#include "kiln/nn/module.h"

namespace kiln::nn {

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t start_dim;
  int64_t end_dim;
};

}  // namespace kiln::nn
