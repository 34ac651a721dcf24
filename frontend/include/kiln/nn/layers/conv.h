// Convolution layers with PyTorch's arguments, parameter names and shapes, initialization
// (weight and bias uniform in +-1/sqrt(fan_in), fan_in = weight.size(1) * kernel volume) and
// padding modes: Conv2d over [N, C, H, W] (or [C, H, W]); Conv1d and Conv3d over [N, C, L] and
// [N, C, D, H, W]; ConvTranspose1d/2d/3d, whose weight is [in, out / groups, *kernel].
//
//   kiln::nn::Conv2d conv(3, 16, 3, {.stride = 2, .padding = 1});
//   kiln::nn::ConvTranspose2d up(16, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1});
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

using Conv1dOptions = Conv2dOptions;  // one value, or one per spatial dim
using Conv3dOptions = Conv2dOptions;

// Conv1d and Conv3d (kiln::nn::functional::conv1d / conv3d).
class ConvNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // 3, 4, kernel_size=(3,), stride=(1,)
  void reset_parameters();

  int64_t in_channels;
  int64_t out_channels;
  IntArg kernel_size;
  Conv2dOptions options;
  Tensor weight;  // [out_channels, in_channels / groups, *kernel]
  Tensor bias;    // [out_channels]; undefined when options.bias = false

 protected:
  ConvNd(size_t spatial_dims, int64_t in_channels, int64_t out_channels, IntArg kernel_size,
         Conv2dOptions options);

 private:
  size_t spatial_dims_;
};

class Conv1d : public ConvNd {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, IntArg kernel_size, Conv1dOptions options = {})
      : ConvNd(1, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};
class Conv3d : public ConvNd {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, IntArg kernel_size, Conv3dOptions options = {})
      : ConvNd(3, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};

struct ConvTransposeOptions {
  IntArg stride = 1;
  IntArg padding = 0;
  // Added to one side of the output (0 <= output_padding < stride): picks among the input
  // sizes a strided convolution maps to the same size.
  IntArg output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  IntArg dilation = 1;
};

// The adjoint of a convolution (kiln::nn::functional::conv_transpose1d/2d/3d): upsampling
// layers of decoders and GAN generators. Only zero padding (as PyTorch).
class ConvTransposeNd : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  // PyTorch's forward(input, output_size): the output's spatial size (its last dims; batch
  // and channel entries may lead), chosen among the sizes this stride allows by an
  // output_padding computed for the call. Other sizes are an error naming the valid range.
  Tensor forward(const Tensor& input, IntList output_size);
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels;
  int64_t out_channels;
  IntArg kernel_size;
  ConvTransposeOptions options;
  Tensor weight;  // [in_channels, out_channels / groups, *kernel]
  Tensor bias;    // [out_channels]; undefined when options.bias = false

 protected:
  ConvTransposeNd(size_t spatial_dims, int64_t in_channels, int64_t out_channels,
                  IntArg kernel_size, ConvTransposeOptions options);

 private:
  size_t spatial_dims_;
};

class ConvTranspose1d : public ConvTransposeNd {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, IntArg kernel_size,
                  ConvTransposeOptions options = {})
      : ConvTransposeNd(1, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};
class ConvTranspose2d : public ConvTransposeNd {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntArg kernel_size,
                  ConvTransposeOptions options = {})
      : ConvTransposeNd(2, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};
class ConvTranspose3d : public ConvTransposeNd {
 public:
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, IntArg kernel_size,
                  ConvTransposeOptions options = {})
      : ConvTransposeNd(3, in_channels, out_channels, std::move(kernel_size), std::move(options)) {}
};

}  // namespace kiln::nn
