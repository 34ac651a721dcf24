// Activation layers.
#include "kiln/nn/layers/activation.h"

#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::nn {

namespace F = kiln::nn::functional;

Tensor ReLU::forward(const Tensor& input) {
  return kiln::relu(input);
}

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  KILN_CHECK(this->approximate == "none" || this->approximate == "tanh",
             "[GELU] approximate must be \"none\" or \"tanh\", got \"", this->approximate,
             "\". Fix: use one of them.");
}

Tensor GELU::forward(const Tensor& input) {
  return kiln::gelu(input, approximate == "tanh");
}

std::string GELU::extra_repr() const {
  return "approximate='" + approximate + "'";
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
