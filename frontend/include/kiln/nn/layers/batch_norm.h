// nn::BatchNorm1d / BatchNorm2d: per-channel batch normalization with PyTorch's buffers
// (running_mean, running_var, num_batches_tracked), momentum (nullopt: cumulative average),
// affine and track_running_stats. Training normalizes with batch statistics and updates the
// running ones; eval() normalizes with the running statistics.
#pragma once

#include <optional>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

// The shared implementation; use BatchNorm1d or BatchNorm2d.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  // running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset_running_stats();
  // Also resets weight to 1 and bias to 0.
  void reset_parameters();

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight;               // [C]; undefined unless affine
  Tensor bias;                 // [C]; undefined unless affine
  Tensor running_mean;         // [C]; undefined unless track_running_stats
  Tensor running_var;          // [C]
  Tensor num_batches_tracked;  // int64 scalar

 protected:
  BatchNorm(int64_t num_features, BatchNormOptions options);
  // Fails with PyTorch's message when the input rank does not fit the layer.
  virtual void check_input_dim(const Tensor& input) const = 0;
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {})
      : BatchNorm(num_features, options) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {})
      : BatchNorm(num_features, options) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};

}  // namespace kiln::nn
