// Activation layers.
#include "kiln/nn/layers/activation.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/factory.h"
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

LeakyReLU::LeakyReLU(double negative_slope) : negative_slope(negative_slope) {}

Tensor LeakyReLU::forward(const Tensor& input) {
  return kiln::leaky_relu(input, negative_slope);
}

std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + detail::float_str(negative_slope);
}

ELU::ELU(double alpha) : alpha(alpha) {}

Tensor ELU::forward(const Tensor& input) {
  return kiln::elu(input, alpha);
}

std::string ELU::extra_repr() const {
  return "alpha=" + detail::float_str(alpha);
}

Softplus::Softplus(double beta, double threshold) : beta(beta), threshold(threshold) {
  KILN_CHECK(beta != 0, "[Softplus] expected a non-zero beta, got 0. Fix: pass e.g. 1.0.");
}

Tensor Softplus::forward(const Tensor& input) {
  return F::softplus(input, beta, threshold);
}

std::string Softplus::extra_repr() const {
  return "beta=" + detail::float_str(beta) + ", threshold=" + detail::float_str(threshold);
}

Tensor Mish::forward(const Tensor& input) {
  return F::mish(input);
}

Tensor Hardswish::forward(const Tensor& input) {
  return F::hardswish(input);
}

Tensor Hardsigmoid::forward(const Tensor& input) {
  return F::hardsigmoid(input);
}

GLU::GLU(int64_t dim) : dim(dim) {}

Tensor GLU::forward(const Tensor& input) {
  return F::glu(input, dim);
}

std::string GLU::extra_repr() const {
  return "dim=" + std::to_string(dim);
}

PReLU::PReLU(int64_t num_parameters, double init) : num_parameters(num_parameters) {
  KILN_CHECK(num_parameters >= 1, "[PReLU] expected num_parameters >= 1, got ", num_parameters,
             ". Fix: pass 1 (one slope) or the channel count.");
  weight = register_parameter("weight", full({num_parameters}, init));
}

Tensor PReLU::forward(const Tensor& input) {
  return F::prelu(input, weight);
}

std::string PReLU::extra_repr() const {
  return "num_parameters=" + std::to_string(num_parameters);
}

}  // namespace kiln::nn
