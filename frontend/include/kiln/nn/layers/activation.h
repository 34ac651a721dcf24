// Activation layers: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax. Stateless, so
// they may be called without registration (registering them still shows them in printouts).
#pragma once

#include <string>

#include "kiln/nn/module.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::None);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // approximate='none', as PyTorch prints it

  GeluApproximation approximate;
};

class SiLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

// The dim is required (PyTorch's implicit-dim choice is deprecated there).
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t dim;
};

}  // namespace kiln::nn
