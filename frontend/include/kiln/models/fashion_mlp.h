// FashionMLP: the classic Fashion-MNIST baseline, 784-256-256-10 with ReLU and dropout
// (269,322 parameters). State paths: fc1.weight, fc2.weight, fc3.weight (and biases).
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/models/config.h"
#include "kiln/nn/layers/activation.h"
#include "kiln/nn/layers/dropout.h"
#include "kiln/nn/layers/flatten.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/module.h"

namespace kiln::models {

struct FashionMLPConfig {
  int64_t d_in = 784;
  int64_t d_hidden = 256;
  int64_t d_out = 10;
  double dropout = 0.3;
  template <class V>
  void fields(V& v) {
    v("d_in", d_in);
    v("d_hidden", d_hidden);
    v("d_out", d_out);
    v("dropout", dropout);
  }
};

class FashionMLP : public nn::Module {
 public:
  explicit FashionMLP(const FashionMLPConfig& config);
  // Accepts [N, d_in] or anything that flattens to it ([N, 1, 28, 28]).
  Tensor forward(const Tensor& x) override;

  FashionMLPConfig config;
  nn::ModulePtr<nn::Flatten> flatten;
  nn::ModulePtr<nn::Linear> fc1;
  nn::ModulePtr<nn::Linear> fc2;
  nn::ModulePtr<nn::Linear> fc3;
  nn::ModulePtr<nn::ReLU> act;
  nn::ModulePtr<nn::Dropout> drop;
};

std::shared_ptr<FashionMLP> build(const FashionMLPConfig& config);

}  // namespace kiln::models
