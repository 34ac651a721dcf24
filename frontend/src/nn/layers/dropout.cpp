// nn::Dropout and the channel dropouts.
#include "kiln/nn/layers/dropout.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

Dropout::Dropout(double p) : p(p) {
  KILN_CHECK(p >= 0 && p <= 1, "[Dropout] the dropout probability must lie in [0, 1], got ", p,
             ". Fix: pass e.g. 0.1 or 0.5.");
}

Tensor Dropout::forward(const Tensor& input) {
  return functional::dropout(input, p, is_training());
}

std::string Dropout::extra_repr() const {
  return "p=" + detail::float_str(p) + ", inplace=false";
}

ChannelDropout::ChannelDropout(double p, int64_t spatial_dims) : p(p), spatial_dims_(spatial_dims) {
  KILN_CHECK(p >= 0 && p <= 1, "[Dropout", spatial_dims, "d] the dropout probability must lie in [0, 1], got ", p,
             ". Fix: pass e.g. 0.1 or 0.5.");
}

Tensor ChannelDropout::forward(const Tensor& input) {
  const bool training = is_training();
  if (spatial_dims_ == 1) return functional::dropout1d(input, p, training);
  if (spatial_dims_ == 2) return functional::dropout2d(input, p, training);
  return functional::dropout3d(input, p, training);
}

std::string ChannelDropout::extra_repr() const {
  return "p=" + detail::float_str(p) + ", inplace=false";
}

}  // namespace kiln::nn
