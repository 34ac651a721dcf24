// nn::PixelShuffle, nn::PixelUnshuffle and nn::Upsample.
#include "kiln/nn/layers/resample.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

Tensor PixelShuffle::forward(const Tensor& input) {
  return functional::pixel_shuffle(input, upscale_factor);
}

std::string PixelShuffle::extra_repr() const {
  return "upscale_factor=" + std::to_string(upscale_factor);
}

Tensor PixelUnshuffle::forward(const Tensor& input) {
  return functional::pixel_unshuffle(input, downscale_factor);
}

std::string PixelUnshuffle::extra_repr() const {
  return "downscale_factor=" + std::to_string(downscale_factor);
}

Upsample::Upsample(UpsampleOptions options) : options(std::move(options)) {
  KILN_CHECK(this->options.size.empty() != this->options.scale_factor.empty(),
             "[Upsample] expected exactly one of size and scale_factor. Fix: pass .size = {H, W} or .scale_factor = "
             "{2}.");
}

Tensor Upsample::forward(const Tensor& input) {
  return functional::interpolate(input, {.size = options.size,
                                         .scale_factor = options.scale_factor,
                                         .mode = options.mode,
                                         .align_corners = options.align_corners});
}

std::string Upsample::extra_repr() const {
  auto list = [](const auto& values) {
    std::string s = values.size() == 1 ? "" : "(";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + detail::float_str(static_cast<double>(values[i]));
    return s + (values.size() == 1 ? "" : ")");
  };
  std::string s = options.size.empty() ? "scale_factor=" + list(options.scale_factor) : "size=" + list(options.size);
  s += ", mode='" + options.mode + "'";
  if (options.align_corners) s += std::string(", align_corners=") + detail::bool_str(*options.align_corners);
  return s;
}

}  // namespace kiln::nn
