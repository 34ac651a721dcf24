// kiln::nn::init: torch.nn.init's initializers. Random draws use kiln::rand/randn in the
// tensor's dtype; orthogonal_ and trunc_normal_ finish on the host in double precision
// (a Householder QR; an inverse error function), since init is not a hot path.
#include "kiln/nn/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/random.h"

namespace kiln::nn::init {

namespace {

void check_defined(const Tensor& t, const char* fn) {
  KILN_CHECK(t.defined(), "[nn::init::", fn,
             "] got an undefined tensor. Fix: pass an "
             "allocated tensor (a lazy layer's weight exists only after its first forward or "
             "build()).");
}

void check_floating(const Tensor& t, const char* fn) {
  check_defined(t, fn);
  KILN_CHECK(t.is_floating_point(), "[nn::init::", fn, "] expected a floating-point tensor, got ",
             t.type_str(), ". Fix: initialize float weights, or convert with .to(kFloat32) first.");
}

TensorOptions options_of(const Tensor& t) {
  return TensorOptions(t.dtype()).with_device(t.device());
}

// Writes host values (row-major, t's shape) into t.
void assign(Tensor& t, const std::vector<double>& values) {
  Tensor src = Tensor::from_vector(values, t.sizes()).to(t.dtype());
  if (t.device() != src.device()) src = src.to(t.device());
  t.copy_(src);
}

// Inverse of erf on (-1, 1): a closed-form first guess (Winitzki, ~1e-3 relative error)
// polished by Newton steps, using erfc near +-1 where erf has no digits left.
double erfinv(double y) {
  if (std::isnan(y)) return y;
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  if (y < 0) return -erfinv(-y);
  const double a = 0.147, pi = std::numbers::pi;
  double ln = std::log((1 - y) * (1 + y));
  double t = 2 / (pi * a) + ln / 2;
  double x = std::sqrt(std::sqrt(t * t - ln / a) - t);
  for (int i = 0; i < 5; ++i) {
    double residual = y < 0.5 ? std::erf(x) - y : (1 - y) - std::erfc(x);
    double slope = 2 / std::sqrt(pi) * std::exp(-x * x);
    if (slope == 0) break;
    x -= residual / slope;
  }
  return x;
}

double fan_for(const Tensor& t, FanMode mode) {
  Fans f = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == FanMode::FanIn ? f.fan_in : f.fan_out);
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv1d:
    case Nonlinearity::Conv2d:
    case Nonlinearity::Conv3d:
    case Nonlinearity::ConvTranspose1d:
    case Nonlinearity::ConvTranspose2d:
    case Nonlinearity::ConvTranspose3d:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      double slope = param.value_or(0.01);
      KILN_CHECK(std::isfinite(slope),
                 "[nn::init::calculate_gain] expected a finite negative "
                 "slope for leaky_relu, got ",
                 slope, ". Fix: pass e.g. 0.01.");
      return std::sqrt(2.0 / (1 + slope * slope));
    }
    case Nonlinearity::SELU:
      return 3.0 / 4;
  }
  KILN_FAIL("[nn::init::calculate_gain] unknown nonlinearity ", static_cast<int>(nonlinearity),
            ". Fix: pass a kiln::nn::init::Nonlinearity value.");
}

Fans calculate_fan_in_and_fan_out(const Tensor& tensor) {
  check_defined(tensor, "calculate_fan_in_and_fan_out");
  KILN_CHECK(tensor.dim() >= 2,
             "[nn::init] fan in and fan out need a tensor with at least 2 "
             "dims ([out, in, ...]), got ",
             tensor.type_str(),
             ". Fix: use uniform_/normal_/"
             "constant_ for biases and other 1-D tensors.");
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

Tensor uniform_(Tensor tensor, double a, double b, Generator* generator) {
  check_floating(tensor, "uniform_");
  KILN_CHECK(std::isfinite(a) && std::isfinite(b) && a <= b,
             "[nn::init::uniform_] expected finite "
             "bounds with a <= b, got a=",
             a, ", b=", b, ". Fix: pass the lower bound first.");
  NoGradGuard no_grad;
  Tensor r = rand(tensor.sizes(), options_of(tensor), generator);
  r.mul_(b - a).add_(a);
  tensor.copy_(r);
  return tensor;
}

Tensor normal_(Tensor tensor, double mean, double std, Generator* generator) {
  check_floating(tensor, "normal_");
  KILN_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0,
             "[nn::init::normal_] expected "
             "a finite mean and std >= 0, got mean=",
             mean, ", std=", std,
             ". Fix: pass the "
             "standard deviation (not the variance), a non-negative number.");
  NoGradGuard no_grad;
  Tensor r = randn(tensor.sizes(), options_of(tensor), generator);
  r.mul_(std).add_(mean);
  tensor.copy_(r);
  return tensor;
}

Tensor trunc_normal_(Tensor tensor, double mean, double std, double a, double b,
                     Generator* generator) {
  check_floating(tensor, "trunc_normal_");
  KILN_CHECK(std::isfinite(mean) && std::isfinite(std) && std > 0,
             "[nn::init::trunc_normal_] "
             "expected a finite mean and std > 0, got mean=",
             mean, ", std=", std, ". Fix: pass the standard deviation of the untruncated normal.");
  KILN_CHECK(a < b, "[nn::init::trunc_normal_] expected a < b (absolute bounds), got a=", a,
             ", b=", b, ". Fix: pass the lower bound first, e.g. a=-2*std, b=2*std.");
  NoGradGuard no_grad;
  auto cdf = [](double x) { return (1 + std::erf(x / std::numbers::sqrt2)) / 2; };
  // Map U[0, 1) onto [cdf(a), cdf(b)) in erf's coordinates, then invert.
  double lo = 2 * cdf((a - mean) / std) - 1, hi = 2 * cdf((b - mean) / std) - 1;
  std::vector<double> u = rand(tensor.sizes(), options_of(tensor), generator).to_vector<double>();
  for (double& v : u) {
    double x = erfinv(lo + v * (hi - lo)) * std * std::numbers::sqrt2 + mean;
    v = std::clamp(x, a, b);
  }
  assign(tensor, u);
  return tensor;
}

Tensor constant_(Tensor tensor, double value) {
  check_defined(tensor, "constant_");
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}

Tensor zeros_(Tensor tensor) {
  return constant_(std::move(tensor), 0.0);
}

Tensor ones_(Tensor tensor) {
  return constant_(std::move(tensor), 1.0);
}

Tensor xavier_uniform_(Tensor tensor, double gain, Generator* generator) {
  check_floating(tensor, "xavier_uniform_");
  Fans f = calculate_fan_in_and_fan_out(tensor);
  double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(tensor), -bound, bound, generator);
}

Tensor xavier_normal_(Tensor tensor, double gain, Generator* generator) {
  check_floating(tensor, "xavier_normal_");
  Fans f = calculate_fan_in_and_fan_out(tensor);
  double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  return normal_(std::move(tensor), 0, std, generator);
}

Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode, Nonlinearity nonlinearity,
                        Generator* generator) {
  check_floating(tensor, "kaiming_uniform_");
  if (tensor.numel() == 0) return tensor;  // PyTorch: a no-op (with a warning)
  double std = calculate_gain(nonlinearity, a) / std::sqrt(fan_for(tensor, mode));
  double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(tensor), -bound, bound, generator);
}

Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode, Nonlinearity nonlinearity,
                       Generator* generator) {
  check_floating(tensor, "kaiming_normal_");
  if (tensor.numel() == 0) return tensor;
  double std = calculate_gain(nonlinearity, a) / std::sqrt(fan_for(tensor, mode));
  return normal_(std::move(tensor), 0, std, generator);
}

Tensor orthogonal_(Tensor tensor, double gain, Generator* generator) {
  check_floating(tensor, "orthogonal_");
  KILN_CHECK(tensor.dim() >= 2,
             "[nn::init::orthogonal_] expected a tensor with at least 2 dims, "
             "got ",
             tensor.type_str(),
             ". Fix: orthogonal init applies to weight matrices "
             "(and conv kernels, flattened after dim 0).");
  if (tensor.numel() == 0) return tensor;
  NoGradGuard no_grad;
  const int64_t rows = tensor.size(0), cols = tensor.numel() / rows;
  std::vector<double> drawn =
      randn({rows, cols}, options_of(tensor), generator).to_vector<double>();
  // Factor the tall orientation A (m x n, m >= n): A = Q R.
  const bool wide = rows < cols;
  const int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  std::vector<double> A(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) A[wide ? c * n + r : r * n + c] = drawn[r * cols + c];
  auto at = [&](std::vector<double>& M, int64_t i, int64_t j) -> double& { return M[i * n + j]; };
  // Householder: H_k = I - 2 v_k v_k^T zeroes column k below the diagonal.
  std::vector<std::vector<double>> vs;
  std::vector<double> rdiag(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    double norm2 = 0;
    for (int64_t i = k; i < m; ++i) norm2 += at(A, i, k) * at(A, i, k);
    double norm = std::sqrt(norm2);
    double alpha = at(A, k, k) > 0 ? -norm : norm;
    std::vector<double> v(static_cast<size_t>(m - k));
    for (int64_t i = k; i < m; ++i) v[i - k] = at(A, i, k);
    v[0] -= alpha;
    double vnorm = 0;
    for (double e : v) vnorm += e * e;
    vnorm = std::sqrt(vnorm);
    if (vnorm > 0)
      for (double& e : v) e /= vnorm;
    for (int64_t j = k; j < n; ++j) {
      double dot = 0;
      for (int64_t i = k; i < m; ++i) dot += v[i - k] * at(A, i, j);
      for (int64_t i = k; i < m; ++i) at(A, i, j) -= 2 * v[i - k] * dot;
    }
    rdiag[k] = at(A, k, k);
    vs.push_back(std::move(v));
  }
  // Thin Q = H_0 H_1 ... H_{n-1} [I_n; 0], applied right to left.
  std::vector<double> Q(static_cast<size_t>(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j) at(Q, j, j) = 1;
  for (int64_t k = n - 1; k >= 0; --k) {
    const auto& v = vs[k];
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t i = k; i < m; ++i) dot += v[i - k] * at(Q, i, j);
      for (int64_t i = k; i < m; ++i) at(Q, i, j) -= 2 * v[i - k] * dot;
    }
  }
  // Make R's diagonal positive (the unique QR), which makes Q Haar-distributed.
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sign = rdiag[j] > 0 ? 1.0 : (rdiag[j] < 0 ? -1.0 : 0.0);
      double q = at(Q, i, j) * sign * gain;
      if (wide)
        out[j * cols + i] = q;
      else
        out[i * cols + j] = q;
    }
  assign(tensor, out);
  return tensor;
}

}  // namespace kiln::nn::init
