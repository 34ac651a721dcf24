// Pooling layers over [N, C, H, W] (or [C, H, W]): MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
// AdaptiveMaxPool2d, MaxUnpool2d; over [N, C, L] and [N, C, D, H, W]: MaxPool1d/3d,
// AvgPool1d/3d, AdaptiveAvgPool1d. Stateless wrappers of kiln::nn::functional with PyTorch's
// arguments and printouts.
#pragma once

#include <optional>

#include "kiln/nn/int_arg.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

struct MaxPool2dOptions {
  IntArg stride{};  // empty: kernel_size
  IntArg padding = 0;
  IntArg dilation = 1;
  bool ceil_mode = false;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntArg kernel_size, MaxPool2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  IntArg kernel_size;
  MaxPool2dOptions options;
};

struct AvgPool2dOptions {
  IntArg stride{};  // empty: kernel_size
  IntArg padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override{};
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntArg kernel_size, AvgPool2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  IntArg kernel_size;
  AvgPool2dOptions options;
};

// output_size: one value or (OH, OW); -1 keeps that input dim (PyTorch's None).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntArg output_size);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  IntArg output_size;
};

using MaxPool1dOptions = MaxPool2dOptions;  // one value, or one per spatial dim
using MaxPool3dOptions = MaxPool2dOptions;
using AvgPool1dOptions = AvgPool2dOptions;  // (divisor_override: AvgPool3d only, as PyTorch)
using AvgPool3dOptions = AvgPool2dOptions;

// MaxPool1d and MaxPool3d.
class MaxPoolNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  IntArg kernel_size;
  MaxPool2dOptions options;

 protected:
  MaxPoolNd(size_t spatial_dims, IntArg kernel_size, MaxPool2dOptions options);

 private:
  size_t spatial_dims_;
};
class MaxPool1d : public MaxPoolNd {
 public:
  explicit MaxPool1d(IntArg kernel_size, MaxPool1dOptions options = {})
      : MaxPoolNd(1, std::move(kernel_size), std::move(options)) {}
};
class MaxPool3d : public MaxPoolNd {
 public:
  explicit MaxPool3d(IntArg kernel_size, MaxPool3dOptions options = {})
      : MaxPoolNd(3, std::move(kernel_size), std::move(options)) {}
};

// AvgPool1d and AvgPool3d.
class AvgPoolNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  IntArg kernel_size;
  AvgPool2dOptions options;

 protected:
  AvgPoolNd(size_t spatial_dims, IntArg kernel_size, AvgPool2dOptions options);

 private:
  size_t spatial_dims_;
};
class AvgPool1d : public AvgPoolNd {
 public:
  explicit AvgPool1d(IntArg kernel_size, AvgPool1dOptions options = {})
      : AvgPoolNd(1, std::move(kernel_size), std::move(options)) {}
};
class AvgPool3d : public AvgPoolNd {
 public:
  explicit AvgPool3d(IntArg kernel_size, AvgPool3dOptions options = {})
      : AvgPoolNd(3, std::move(kernel_size), std::move(options)) {}
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t output_size;
};

// The maxima only: PyTorch's return_indices=true has no counterpart yet.
class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(IntArg output_size);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  IntArg output_size;
};

struct MaxUnpool2dOptions {
  IntArg stride{};  // empty: kernel_size
  IntArg padding = 0;
};

// Called with the pooled values and their indices (from max_pool2d_with_indices):
// nn::call(unpool, values, indices), or with the output's size (H, W) as a third argument.
class MaxUnpool2d : public Module {
 public:
  explicit MaxUnpool2d(IntArg kernel_size, MaxUnpool2dOptions options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& indices);
  Tensor forward(const Tensor& input, const Tensor& indices, IntList output_size);
  std::string extra_repr() const override;

  IntArg kernel_size;
  MaxUnpool2dOptions options;
};

}  // namespace kiln::nn
