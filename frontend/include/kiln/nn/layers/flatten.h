// nn::Flatten: merges dims start_dim..end_dim (default: all but the batch dim); nn::Unflatten
// splits one dim into several.
#pragma once

#include <vector>

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

// Splits dim `dim` into `sizes` (one entry may be -1: inferred), as PyTorch's Unflatten.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, std::vector<int64_t> sizes);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // dim=1, unflattened_size=(2, 5)

  int64_t dim;
  std::vector<int64_t> sizes;
};

}  // namespace kiln::nn
