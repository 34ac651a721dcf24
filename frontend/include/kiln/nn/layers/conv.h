// nn::Conv2d: 2-D convolution over [N, C, H, W] (or [C, H, W]) with PyTorch's arguments,
// initialization (weight and bias uniform in +-1/sqrt(in_channels / groups * kh * kw)) and
// padding modes.
//
//   kiln::nn::Conv2d conv(3, 16, 3, {.stride = 2, .padding = 1});
#pragma once

#include <string>

#include "kiln/nn/int_arg.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

struct Conv2dOptions {
  IntArg stride = 1;
  IntArg padding = 0;
  IntArg dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  // How the border is padded: "zeros", "reflect", "replicate" or "circular".
  std::string padding_mode = "zeros";
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, IntArg kernel_size, Conv2dOptions options = {});

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels;
  int64_t out_channels;
  IntArg kernel_size;
  Conv2dOptions options;
  Tensor weight;  // [out_channels, in_channels / groups, kh, kw]
  Tensor bias;    // [out_channels]; undefined when options.bias = false
};

}  // namespace kiln::nn
