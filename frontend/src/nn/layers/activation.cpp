// Activation layers.
#include "kiln/nn/layers/activation.h"

#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::nn {

namespace F = kiln::nn::functional;

Tensor ReLU::forward(const Tensor& input) {
  return kiln::relu(input);
}

GELU::GELU(GeluApproximation approximate) : approximate(approximate) {}

Tensor GELU::forward(const Tensor& input) {
  return kiln::gelu(input, approximate);
}

std::string GELU::extra_repr() const {
  return std::string("approximate='") + gelu_approximation_name(approximate) + "'";
}

Tensor SiLU::forward(const Tensor& input) {
  return kiln::silu(input);
}

Tensor Sigmoid::forward(const Tensor& input) {
  return kiln::sigmoid(input);
}

Tensor Tanh::forward(const Tensor& input) {
  return kiln::tanh(input);
}

Softmax::Softmax(int64_t dim) : dim(dim) {}

Tensor Softmax::forward(const Tensor& input) {
  return F::softmax(input, dim);
}

std::string Softmax::extra_repr() const {
  return "dim=" + std::to_string(dim);
}

LogSoftmax::LogSoftmax(int64_t dim) : dim(dim) {}

Tensor LogSoftmax::forward(const Tensor& input) {
  return F::log_softmax(input, dim);
}

std::string LogSoftmax::extra_repr() const {
  return "dim=" + std::to_string(dim);
}

}  // namespace kiln::nn
