// The activations composed from table ops (kiln/nn/functional.h): softplus, mish, hardswish,
// hardsigmoid, glu, prelu. Compositions run on every device, differentiate through their parts
// and fuse into one kernel under compile.
#include "kiln/error.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::nn::functional {

Tensor softplus(const Tensor& x, double beta, double threshold) {
  KILN_CHECK(beta != 0, "[softplus] expected a non-zero beta, got 0. Fix: pass e.g. 1.");
  const Tensor scaled = x * beta;
  // exp's argument is capped at the threshold: where x is returned instead, the other branch
  // must not overflow (its gradient would be inf * 0 = nan).
  return where(scaled > threshold, x, log1p(exp(minimum(scaled, scalar_like(threshold, scaled)))) / beta);
}

Tensor mish(const Tensor& x) { return x * tanh(softplus(x)); }

Tensor hardsigmoid(const Tensor& x) { return clamp(x + 3, 0, 6) / 6; }

Tensor hardswish(const Tensor& x) { return x * hardsigmoid(x); }

Tensor glu(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.defined() && x.dim() >= 1, "[glu] expected a tensor of 1 or more dims, got ",
             x.defined() ? x.type_str() : std::string("an undefined tensor"), ".");
  const int64_t d = wrap_dim(dim, x.dim(), "glu");
  KILN_CHECK(x.size(d) % 2 == 0, "[glu] expected an even size along dim ", dim, ", got ",
             x.type_str(), ". Fix: split along a dim of even size.");
  const int64_t half = x.size(d) / 2;
  return narrow(x, d, 0, half) * sigmoid(narrow(x, d, half, half));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  KILN_CHECK(x.defined() && weight.defined(), "[prelu] got an undefined tensor.");
  const int64_t channels = weight.numel();
  if (channels == 1) return where(x >= 0, x, reshape(weight, {}) * x);
  const int64_t channel_dim = x.dim() >= 2 ? 1 : 0;
  KILN_CHECK(x.dim() >= 1 && x.size(channel_dim) == channels, "[prelu] a weight of ", channels,
             " elements needs ", channels, " channels (dim ", channel_dim, " of x), got ", x.type_str(),
             ". Fix: build PReLU with num_parameters equal to the channel count, or 1.");
  Shape per_channel(static_cast<size_t>(x.dim() - channel_dim), 1);
  per_channel[0] = channels;
  return where(x >= 0, x, reshape(weight, per_channel) * x);
}

}  // namespace kiln::nn::functional
