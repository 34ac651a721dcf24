// nn::LazyConv2d.
#include "kiln/nn/layers/lazy_conv.h"

#include "../layer_util.h"
#include "kiln/nn/uninitialized.h"

namespace kiln::nn {

namespace {
constexpr const char* kFix =
    "run one forward pass (a dry run) or call model.build({{-1, in_channels, height, width}}) "
    "first";
}

// Conv2d(0, 0, ...) draws nothing from the generator (its tensors are empty).
LazyConv2d::LazyConv2d(int64_t out_channels, IntArg kernel_size, Conv2dOptions options)
    : Conv2d(0, 0, std::move(kernel_size), std::move(options)) {
  int64_t groups = this->options.groups;
  KILN_CHECK(out_channels >= 0 && out_channels % groups == 0,
             "[LazyConv2d] expected a non-negative out_channels divisible by groups (", groups,
             "), got ", out_channels, ". Fix: pass a multiple of groups.");
  this->out_channels = out_channels;
  weight = uninitialized_parameter("LazyConv2d", "weight", kFix);
  *find_parameter("weight") = weight;
  if (this->options.bias) {
    bias = uninitialized_parameter("LazyConv2d", "bias", kFix);
    *find_parameter("bias") = bias;
  }
}

bool LazyConv2d::initialized() const {
  return !is_uninitialized(weight);
}

std::string LazyConv2d::type_name() const {
  return initialized() ? "Conv2d" : "LazyConv2d";
}

void LazyConv2d::materialize(const Tensor& input) {
  KILN_CHECK(input.defined() && (input.dim() == 3 || input.dim() == 4),
             "[LazyConv2d] expected a 4D [N, C, H, W] or 3D [C, H, W] input (C gives "
             "in_channels), got ",
             input.defined() ? input.type_str() : "an undefined tensor",
             ". Fix: pass image batches, or add the batch dim with unsqueeze(0).");
  int64_t in = input.size(-3);
  int64_t groups = options.groups;
  KILN_CHECK(in % groups == 0, "[LazyConv2d] the first input has ", in, " channels (",
             input.type_str(), "), not divisible by groups=", groups,
             ". Fix: pass inputs whose channel count is a multiple of groups.");
  detail::EagerInitScope eager;
  allocate(in);
  reset_parameters();
}

void LazyConv2d::allocate(int64_t in) {
  Tensor w =
      Tensor::empty({out_channels, in / options.groups, kernel_size.at(0), kernel_size.at(1)},
                    weight.dtype(), weight.device())
          .zero_();
  Tensor b = bias.defined() ? Tensor::empty({out_channels}, bias.dtype(), bias.device()).zero_()
                            : Tensor();
  in_channels = in;
  detail::materialize_parameter(weight, w);
  if (bias.defined()) detail::materialize_parameter(bias, b);
}

std::string LazyConv2d::check_loaded(const std::string& name, IntList shape) const {
  const std::string out = std::to_string(out_channels);
  if (name == "bias")
    return shape.size() == 1 && shape[0] == out_channels ? std::string() : "[" + out + "]";
  if (shape.size() == 4 && shape[0] == out_channels && shape[1] > 0 &&
      shape[2] == kernel_size.at(0) && shape[3] == kernel_size.at(1))
    return {};
  return "[" + out + ", in_channels / groups, " + std::to_string(kernel_size.at(0)) + ", " +
         std::to_string(kernel_size.at(1)) + "]";
}

void LazyConv2d::materialize_for_load(IntList weight_shape) {
  if (initialized()) return;
  detail::EagerInitScope eager;
  allocate(weight_shape[1] * options.groups);
}

Tensor LazyConv2d::forward(const Tensor& input) {
  detail::check_floating_input(input, kFloat32, "LazyConv2d");
  if (!initialized()) {
    materialize(input);
  } else if (input.dim() == 3 || input.dim() == 4) {
    KILN_CHECK(input.size(-3) == in_channels,
               "[Conv2d] expected an input with in_channels = ", in_channels,
               " (taken from the first input of this LazyConv2d), got ", input.type_str(),
               ". Fix: pass inputs with ", in_channels,
               " channels; a lazy layer's channel count is fixed by its first forward.");
  }
  return Conv2d::forward(input);
}

}  // namespace kiln::nn
