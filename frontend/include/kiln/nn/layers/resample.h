// Layers that change the spatial size: PixelShuffle and PixelUnshuffle (channels to space and
// back), and Upsample (kiln::nn::functional::interpolate as a layer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor) : upscale_factor(upscale_factor) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // upscale_factor=2

  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor) : downscale_factor(downscale_factor) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t downscale_factor;
};

struct UpsampleOptions {
  std::vector<int64_t> size;         // the output's spatial size, or
  std::vector<double> scale_factor;  // a scale (one value for every spatial dim, or one each)
  std::string mode = "nearest";      // "nearest", "linear", "bilinear", "trilinear"
  std::optional<bool> align_corners;
};

class Upsample : public Module {
 public:
  explicit Upsample(UpsampleOptions options);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // scale_factor=2.0, mode='nearest'

  UpsampleOptions options;
};

}  // namespace kiln::nn
