// kiln::nn::init: in-place weight initializers with torch.nn.init's names, formulas and
// defaults. Each fills `tensor` under NoGradGuard (so it works on parameters that require
// grad), draws from `generator` (kiln::default_generator() when null) and returns tensor.
//
//   model.apply([](Module& m) { if (auto* l = dynamic_cast<Linear*>(&m))
//                                 kiln::nn::init::xavier_uniform_(l->weight); });
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln::nn::init {

enum class Nonlinearity {
  Linear,
  Conv1d,
  Conv2d,
  Conv3d,
  ConvTranspose1d,
  ConvTranspose2d,
  ConvTranspose3d,
  Sigmoid,
  Tanh,
  ReLU,
  LeakyReLU,
  SELU,
};
enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity: 1 (linear, conv, sigmoid), 5/3 (tanh),
// sqrt(2) (relu), sqrt(2 / (1 + slope^2)) (leaky_relu; slope = param, default 0.01),
// 3/4 (selu).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, where the
// receptive field is the product of the dims after the first two (1 for a matrix).
// Throws for tensors with fewer than 2 dims.
struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);

// U(a, b).
Tensor uniform_(Tensor tensor, double a = 0, double b = 1, Generator* generator = nullptr);
// N(mean, std^2).
Tensor normal_(Tensor tensor, double mean = 0, double std = 1, Generator* generator = nullptr);
// N(mean, std^2) truncated to [a, b], sampled by the inverse CDF (no rejection loop); a and
// b are absolute bounds, not multiples of std, as in PyTorch.
Tensor trunc_normal_(Tensor tensor, double mean = 0, double std = 1, double a = -2, double b = 2,
                     Generator* generator = nullptr);
Tensor constant_(Tensor tensor, double value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);

// Glorot: U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1, Generator* generator = nullptr);
// Glorot: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, double gain = 1, Generator* generator = nullptr);

// He: U(-bound, bound) with bound = sqrt(3) * gain / sqrt(fan), gain =
// calculate_gain(nonlinearity, a), fan by `mode`. nn.Linear's default is a = sqrt(5).
// A tensor with no elements is left as is.
Tensor kaiming_uniform_(Tensor tensor, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                        Generator* generator = nullptr);
// He: N(0, std^2) with std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor tensor, double a = 0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                       Generator* generator = nullptr);

// A (semi-)orthogonal matrix times gain: the tensor viewed as [size(0), numel / size(0)]
// gets orthonormal rows (or columns, whichever are fewer), from the QR decomposition of a
// standard normal matrix with R's diagonal made positive (Saxe et al.).
Tensor orthogonal_(Tensor tensor, double gain = 1, Generator* generator = nullptr);

}  // namespace kiln::nn::init
