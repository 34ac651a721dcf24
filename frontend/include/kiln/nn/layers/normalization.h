// GroupNorm, InstanceNorm1d/2d/3d and RMSNorm, with PyTorch's arguments, defaults, parameter
// and buffer names. (BatchNorm and LayerNorm have headers of their own.)
#pragma once

#include <optional>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;
};

// Normalizes each sample's channels in num_groups groups (kiln::nn::functional::group_norm),
// then scales and shifts each channel (weight 1, bias 0 at start).
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // 2, 6, eps=1e-05, affine=true
  void reset_parameters();

  int64_t num_groups, num_channels;
  GroupNormOptions options;
  Tensor weight, bias;  // [num_channels]; undefined without affine
};

struct InstanceNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = false;
  bool track_running_stats = false;
};

// Normalizes each (sample, channel) over its positions. With track_running_stats it keeps
// running_mean/running_var (and num_batches_tracked, for PyTorch's state dicts) while
// training and normalizes with them after eval(). Takes batched [N, C, *] and unbatched
// [C, *] inputs.
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();
  void reset_running_stats();

  int64_t num_features;
  InstanceNormOptions options;
  Tensor weight, bias;                // [num_features]; undefined without affine
  Tensor running_mean, running_var;   // [num_features]; undefined without track_running_stats
  Tensor num_batches_tracked;

 protected:
  InstanceNorm(int64_t num_features, InstanceNormOptions options, int64_t spatial_dims);

 private:
  int64_t spatial_dims_;
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, InstanceNormOptions options = {})
      : InstanceNorm(num_features, options, 1) {}
};
class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, InstanceNormOptions options = {})
      : InstanceNorm(num_features, options, 2) {}
};
class InstanceNorm3d : public InstanceNorm {
 public:
  explicit InstanceNorm3d(int64_t num_features, InstanceNormOptions options = {})
      : InstanceNorm(num_features, options, 3) {}
};

struct RMSNormOptions {
  std::optional<double> eps;  // unset: the machine epsilon of the input's dtype
  bool elementwise_affine = true;
};

// x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight (weight 1 at start).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(std::vector<int64_t> normalized_shape, RMSNormOptions options = {});
  explicit RMSNorm(int64_t normalized_size, RMSNormOptions options = {})
      : RMSNorm(std::vector<int64_t>{normalized_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // (8,), eps=None, elementwise_affine=true
  void reset_parameters();

  std::vector<int64_t> normalized_shape;
  RMSNormOptions options;
  Tensor weight;  // normalized_shape; undefined without elementwise_affine
};

}  // namespace kiln::nn
