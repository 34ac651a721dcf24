// Pooling layers over [N, C, H, W] (or [C, H, W]): MaxPool2d, AvgPool2d, AdaptiveAvgPool2d.
// Stateless wrappers of kiln::nn::functional with PyTorch's arguments and printouts.
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

}  // namespace kiln::nn
