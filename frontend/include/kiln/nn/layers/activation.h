// Activation layers: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, LeakyReLU, ELU,
// Softplus, Mish, Hardswish, Hardsigmoid, GLU; and PReLU, whose slope is learned. All but
// PReLU are stateless, so they may be called without registration (registering them still
// shows them in printouts).
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

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // negative_slope=0.01

  double negative_slope;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // alpha=1.0

  double alpha;
};

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // beta=1.0, threshold=20.0

  double beta, threshold;
};

class Mish : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Hardswish : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Hardsigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class GLU : public Module {
 public:
  explicit GLU(int64_t dim = -1);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // dim=-1

  int64_t dim;
};

// The slope of the negative part is a parameter "weight" of num_parameters elements (1, or
// the channel count), initialized to `init`, as torch.nn.PReLU.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // num_parameters=1

  int64_t num_parameters;
  Tensor weight;
};

}  // namespace kiln::nn
