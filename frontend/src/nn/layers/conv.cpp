// nn::Conv2d.
#include "kiln/nn/layers/conv.h"

#include <cmath>

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

namespace F = kiln::nn::functional;

namespace {
void check_pair(const IntArg& arg, const char* name) {
  KILN_CHECK(arg.values.size() == 1 || arg.values.size() == 2, "[Conv2d] ", name,
             " takes one value or two (height, width), got ", arg.values.size(),
             ". Fix: pass e.g. 3 or {3, 5}.");
}
}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, IntArg kernel_size, Conv2dOptions options)
    : in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(std::move(kernel_size)),
      options(std::move(options)) {
  check_pair(this->kernel_size, "kernel_size");
  check_pair(this->options.stride, "stride");
  check_pair(this->options.padding, "padding");
  check_pair(this->options.dilation, "dilation");
  int64_t groups = this->options.groups;
  KILN_CHECK(groups > 0, "[Conv2d] groups must be positive, got ", groups,
             ". Fix: pass 1 or more.");
  KILN_CHECK(in_channels % groups == 0 && out_channels % groups == 0, "[Conv2d] in_channels (",
             in_channels, ") and out_channels (", out_channels, ") must be divisible by groups (",
             groups, "). Fix: pick groups dividing both.");
  const std::string& mode = this->options.padding_mode;
  KILN_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular",
             "[Conv2d] padding_mode must be \"zeros\", \"reflect\", \"replicate\" or "
             "\"circular\", got \"",
             mode, "\". Fix: use one of them.");
  weight = register_parameter(
      "weight", Tensor::empty({out_channels, in_channels / groups, this->kernel_size.at(0),
                               this->kernel_size.at(1)}));
  bias = register_parameter("bias", this->options.bias ? Tensor::empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() {
  int64_t fan_in = in_channels / options.groups * kernel_size.at(0) * kernel_size.at(1);
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  NoGradGuard no_grad;
  weight.detach().copy_(detail::uniform_tensor(weight.sizes(), bound));
  if (bias.defined()) bias.detach().copy_(detail::uniform_tensor(bias.sizes(), bound));
}

Tensor Conv2d::forward(const Tensor& input) {
  detail::check_floating_input(input, weight.dtype(), "Conv2d");
  if (options.padding_mode == "zeros")
    return F::conv2d(input, weight, bias, options.stride, options.padding, options.dilation,
                     options.groups);
  // Other modes pad explicitly (left, right, top, bottom), then convolve without padding.
  int64_t ph = options.padding.at(0), pw = options.padding.at(1);
  Tensor padded = F::pad(input, {pw, pw, ph, ph}, options.padding_mode);
  return F::conv2d(padded, weight, bias, options.stride, {0}, options.dilation, options.groups);
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.pair_str() +
                  ", stride=" + options.stride.pair_str();
  if (options.padding.at(0) != 0 || options.padding.at(1) != 0)
    s += ", padding=" + options.padding.pair_str();
  if (options.dilation.at(0) != 1 || options.dilation.at(1) != 1)
    s += ", dilation=" + options.dilation.pair_str();
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=false";
  if (options.padding_mode != "zeros") s += ", padding_mode=" + options.padding_mode;
  return s;
}

}  // namespace kiln::nn
