// nn::GroupNorm, nn::InstanceNorm1d/2d/3d and nn::RMSNorm.
#include "kiln/nn/layers/normalization.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::nn {

namespace {

Tensor ones_if(bool make, int64_t n) { return make ? kiln::ones({n}) : Tensor(); }
Tensor zeros_if(bool make, int64_t n) { return make ? kiln::zeros({n}) : Tensor(); }

void reset_affine(Tensor& weight, Tensor& bias) {
  NoGradGuard no_grad;
  if (weight.defined()) weight.detach().fill_(1);
  if (bias.defined()) bias.detach().zero_();
}

}  // namespace

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions options)
    : num_groups(num_groups), num_channels(num_channels), options(options) {
  KILN_CHECK(num_groups > 0 && num_channels > 0 && num_channels % num_groups == 0, "[GroupNorm] expected num_groups (",
             num_groups, ") to divide num_channels (", num_channels, "). Fix: pick a divisor of the channel count.");
  weight = register_parameter("weight", ones_if(options.affine, num_channels));
  bias = register_parameter("bias", zeros_if(options.affine, num_channels));
}

void GroupNorm::reset_parameters() { reset_affine(weight, bias); }

Tensor GroupNorm::forward(const Tensor& input) {
  detail::check_floating_input(input, weight.defined() ? weight.dtype() : kFloat32, "GroupNorm");
  KILN_CHECK(input.dim() >= 2 && input.size(1) == num_channels, "[GroupNorm] expected an input [N, ", num_channels,
             ", *], got ", input.type_str(), ". Fix: build GroupNorm with num_channels = the input's dim 1.");
  return functional::group_norm(input, num_groups, weight, bias, options.eps);
}

std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) + ", eps=" + detail::float_str(options.eps) +
         ", affine=" + detail::bool_str(options.affine);
}

InstanceNorm::InstanceNorm(int64_t num_features, InstanceNormOptions options, int64_t spatial_dims)
    : num_features(num_features), options(options), spatial_dims_(spatial_dims) {
  KILN_CHECK(num_features > 0, "[", type_name(), "] expected num_features > 0, got ", num_features, ".");
  weight = register_parameter("weight", ones_if(options.affine, num_features));
  bias = register_parameter("bias", zeros_if(options.affine, num_features));
  const bool track = options.track_running_stats;
  running_mean = register_buffer("running_mean", zeros_if(track, num_features));
  running_var = register_buffer("running_var", ones_if(track, num_features));
  num_batches_tracked = register_buffer("num_batches_tracked", track ? kiln::zeros({}, kInt64) : Tensor());
}

void InstanceNorm::reset_parameters() { reset_affine(weight, bias); }

void InstanceNorm::reset_running_stats() {
  NoGradGuard no_grad;
  if (!running_mean.defined()) return;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

Tensor InstanceNorm::forward(const Tensor& input) {
  const std::string layer = type_name();
  detail::check_floating_input(input, weight.defined() ? weight.dtype() : kFloat32, layer.c_str());
  const bool batched = input.dim() == spatial_dims_ + 2;
  KILN_CHECK(batched || input.dim() == spatial_dims_ + 1, "[", layer, "] expected an input of ", spatial_dims_ + 2,
             " dims [N, C, *] or ", spatial_dims_ + 1, " dims [C, *], got ", input.type_str(), ".");
  const Tensor x = batched ? input : input.unsqueeze(0);
  KILN_CHECK(x.size(1) == num_features, "[", layer, "] expected ", num_features, " channels, got ", input.type_str(),
             ". Fix: build it with num_features = the channel count.");
  const bool use_input_stats = is_training() || !options.track_running_stats;
  const Tensor y = functional::instance_norm(x, running_mean, running_var, weight, bias, use_input_stats,
                                             options.momentum, options.eps);
  return batched ? y : y.squeeze(0);
}

std::string InstanceNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + detail::float_str(options.eps) +
         ", momentum=" + detail::float_str(options.momentum) + ", affine=" + detail::bool_str(options.affine) +
         ", track_running_stats=" + detail::bool_str(options.track_running_stats);
}

RMSNorm::RMSNorm(std::vector<int64_t> normalized_shape, RMSNormOptions options)
    : normalized_shape(std::move(normalized_shape)), options(options) {
  KILN_CHECK(!this->normalized_shape.empty(), "[RMSNorm] normalized_shape is empty. Fix: pass the trailing dims to "
             "normalize over, e.g. RMSNorm(512).");
  weight = register_parameter("weight", options.elementwise_affine ? kiln::ones(this->normalized_shape) : Tensor());
}

void RMSNorm::reset_parameters() {
  Tensor none;
  reset_affine(weight, none);
}

Tensor RMSNorm::forward(const Tensor& input) {
  detail::check_floating_input(input, weight.defined() ? weight.dtype() : kFloat32, "RMSNorm");
  return functional::rms_norm(input, normalized_shape, weight, options.eps);
}

std::string RMSNorm::extra_repr() const {
  std::string shape = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return shape + ", eps=" + (options.eps ? detail::float_str(*options.eps) : std::string("None")) +
         ", elementwise_affine=" + detail::bool_str(options.elementwise_affine);
}

}  // namespace kiln::nn
