// nn::BatchNorm1d / BatchNorm2d, following PyTorch's _BatchNorm.forward.
#include "kiln/nn/layers/batch_norm.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::nn {

BatchNorm::BatchNorm(int64_t num_features, BatchNormOptions options)
    : num_features(num_features), options(options) {
  KILN_CHECK(num_features > 0, "[", type_name(), "] num_features must be positive, got ",
             num_features, ". Fix: pass the channel count C of [N, C, ...] inputs.");
  weight = register_parameter("weight", options.affine ? kiln::ones({num_features}) : Tensor());
  bias = register_parameter("bias", options.affine ? kiln::zeros({num_features}) : Tensor());
  bool track = options.track_running_stats;
  running_mean = register_buffer("running_mean", track ? kiln::zeros({num_features}) : Tensor());
  running_var = register_buffer("running_var", track ? kiln::ones({num_features}) : Tensor());
  num_batches_tracked =
      register_buffer("num_batches_tracked", track ? kiln::zeros({}, kInt64) : Tensor());
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (!options.affine) return;
  NoGradGuard no_grad;
  weight.detach().fill_(1);
  bias.detach().zero_();
}

Tensor BatchNorm::forward(const Tensor& input) {
  detail::check_floating_input(input, running_mean.defined() ? running_mean.dtype() : kFloat32,
                               type_name().c_str());
  check_input_dim(input);
  KILN_CHECK(input.size(1) == num_features, "[", type_name(), "] expected ", num_features,
             " channels in dim 1, got ", input.type_str(), ". Fix: build ", type_name(), "(",
             input.size(1), "), or check the layer before it.");
  double factor = 0.0;
  if (is_training() && options.track_running_stats) {
    {
      NoGradGuard no_grad;
      num_batches_tracked.add_(1);
    }
    // momentum = nullopt: a cumulative moving average over the batches seen.
    factor = options.momentum ? *options.momentum
                              : 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  // Without running statistics, evaluation also uses the batch statistics.
  bool use_batch_stats = is_training() || !running_mean.defined();
  bool pass_stats = !is_training() || options.track_running_stats;
  return functional::batch_norm(input, pass_stats ? running_mean : Tensor(),
                                pass_stats ? running_var : Tensor(), weight, bias, use_batch_stats,
                                factor, options.eps);
}

std::string BatchNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + detail::float_str(options.eps) +
         ", momentum=" + (options.momentum ? detail::float_str(*options.momentum) : "None") +
         ", affine=" + detail::bool_str(options.affine) +
         ", track_running_stats=" + detail::bool_str(options.track_running_stats);
}

void BatchNorm1d::check_input_dim(const Tensor& input) const {
  KILN_CHECK(input.dim() == 2 || input.dim() == 3,
             "[BatchNorm1d] expected a 2D [N, C] or 3D "
             "[N, C, L] input, got ",
             input.dim(), "D (", input.type_str(),
             "). Fix: use "
             "BatchNorm2d for [N, C, H, W] images, or reshape the input.");
}

void BatchNorm2d::check_input_dim(const Tensor& input) const {
  KILN_CHECK(input.dim() == 4, "[BatchNorm2d] expected a 4D [N, C, H, W] input, got ", input.dim(),
             "D (", input.type_str(),
             "). Fix: use BatchNorm1d for [N, C] or "
             "[N, C, L] inputs, or add the batch dim with unsqueeze(0).");
}

}  // namespace kiln::nn
