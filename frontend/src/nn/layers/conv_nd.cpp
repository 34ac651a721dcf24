// nn::Conv1d, Conv3d and ConvTranspose1d/2d/3d.
#include <cmath>

#include "../layer_util.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers/conv.h"

namespace kiln::nn {

namespace F = kiln::nn::functional;

namespace {

const char* conv_name(size_t dims, bool transposed) {
  static const char* names[2][3] = {{"Conv1d", "Conv2d", "Conv3d"},
                                    {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"}};
  return names[transposed][dims - 1];
}

void check_arg(const IntArg& arg, size_t dims, const char* layer, const char* name) {
  KILN_CHECK(arg.values.size() == 1 || arg.values.size() == dims, "[", layer, "] ", name,
             " takes one value or ", dims, " (one per spatial dim), got ", arg.values.size(),
             ". Fix: pass e.g. 3", dims > 1 ? " or {3, ...}" : "", ".");
}

void check_channels(int64_t in_channels, int64_t out_channels, int64_t groups, const char* layer) {
  KILN_CHECK(in_channels > 0 && out_channels > 0, "[", layer,
             "] expected positive in_channels and out_channels, got ", in_channels, " and ",
             out_channels, ". Fix: pass the channel counts.");
  KILN_CHECK(groups > 0, "[", layer, "] groups must be positive, got ", groups,
             ". Fix: pass 1 or more.");
  KILN_CHECK(in_channels % groups == 0 && out_channels % groups == 0, "[", layer,
             "] in_channels (", in_channels, ") and out_channels (", out_channels,
             ") must be divisible by groups (", groups, "). Fix: pick groups dividing both.");
}

// [a, b, k0, k1, ...] for the kernel's spatial dims.
std::vector<int64_t> weight_shape(int64_t a, int64_t b, const IntArg& kernel, size_t dims) {
  std::vector<int64_t> shape{a, b};
  for (size_t i = 0; i < dims; ++i) shape.push_back(kernel.at(i));
  return shape;
}

// PyTorch's kaiming_uniform(a = sqrt(5)) for the weight and its fan-in bound for the bias:
// both U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight.size(1) * kernel volume.
void reset_conv(Tensor& weight, Tensor& bias) {
  int64_t fan_in = weight.size(1);
  for (int64_t d = 2; d < weight.dim(); ++d) fan_in *= weight.size(d);
  double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  NoGradGuard no_grad;
  weight.detach().copy_(detail::uniform_tensor(weight.sizes(), bound));
  if (bias.defined()) bias.detach().copy_(detail::uniform_tensor(bias.sizes(), bound));
}

bool all_equal(const IntArg& arg, size_t dims, int64_t v) {
  for (size_t i = 0; i < dims; ++i)
    if (arg.at(i) != v) return false;
  return true;
}

}  // namespace

ConvNd::ConvNd(size_t spatial_dims, int64_t in_channels, int64_t out_channels, IntArg kernel_size,
               Conv2dOptions options)
    : in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(std::move(kernel_size)),
      options(std::move(options)),
      spatial_dims_(spatial_dims) {
  const char* layer = conv_name(spatial_dims, false);
  for (auto [arg, name] : {std::pair{&this->kernel_size, "kernel_size"},
                           {&this->options.stride, "stride"}, {&this->options.padding, "padding"},
                           {&this->options.dilation, "dilation"}})
    check_arg(*arg, spatial_dims, layer, name);
  check_channels(in_channels, out_channels, this->options.groups, layer);
  const std::string& mode = this->options.padding_mode;
  KILN_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular",
             "[", layer, "] padding_mode must be \"zeros\", \"reflect\", \"replicate\" or "
             "\"circular\", got \"", mode, "\". Fix: use one of them.");
  weight = register_parameter(
      "weight", Tensor::empty(weight_shape(out_channels, in_channels / this->options.groups,
                                           this->kernel_size, spatial_dims)));
  bias = register_parameter("bias", this->options.bias ? Tensor::empty({out_channels}) : Tensor());
  reset_parameters();
}

void ConvNd::reset_parameters() {
  reset_conv(weight, bias);
}

Tensor ConvNd::forward(const Tensor& input) {
  const char* layer = conv_name(spatial_dims_, false);
  detail::check_floating_input(input, weight.dtype(), layer);
  auto conv = [&](const Tensor& x, IntList padding) {
    return spatial_dims_ == 1 ? F::conv1d(x, weight, bias, options.stride, padding,
                                          options.dilation, options.groups)
                              : F::conv3d(x, weight, bias, options.stride, padding,
                                          options.dilation, options.groups);
  };
  if (options.padding_mode == "zeros") return conv(input, options.padding);
  // Other modes pad explicitly (last dim first, as F::pad), then convolve without padding.
  std::vector<int64_t> amounts;
  for (size_t i = spatial_dims_; i-- > 0;) {
    amounts.push_back(options.padding.at(i));
    amounts.push_back(options.padding.at(i));
  }
  return conv(F::pad(input, amounts, options.padding_mode), {0});
}

std::string ConvNd::extra_repr() const {
  const size_t d = spatial_dims_;
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.tuple_str(d) +
                  ", stride=" + options.stride.tuple_str(d);
  if (!all_equal(options.padding, d, 0)) s += ", padding=" + options.padding.tuple_str(d);
  if (!all_equal(options.dilation, d, 1)) s += ", dilation=" + options.dilation.tuple_str(d);
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=false";
  if (options.padding_mode != "zeros") s += ", padding_mode=" + options.padding_mode;
  return s;
}

ConvTransposeNd::ConvTransposeNd(size_t spatial_dims, int64_t in_channels, int64_t out_channels,
                                 IntArg kernel_size, ConvTransposeOptions options)
    : in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(std::move(kernel_size)),
      options(std::move(options)),
      spatial_dims_(spatial_dims) {
  const char* layer = conv_name(spatial_dims, true);
  for (auto [arg, name] :
       {std::pair{&this->kernel_size, "kernel_size"}, {&this->options.stride, "stride"},
        {&this->options.padding, "padding"}, {&this->options.output_padding, "output_padding"},
        {&this->options.dilation, "dilation"}})
    check_arg(*arg, spatial_dims, layer, name);
  check_channels(in_channels, out_channels, this->options.groups, layer);
  for (size_t i = 0; i < spatial_dims; ++i)
    KILN_CHECK(this->options.output_padding.at(i) >= 0 &&
                   this->options.output_padding.at(i) < this->options.stride.at(i),
               "[", layer, "] expected 0 <= output_padding < stride, got output_padding=",
               this->options.output_padding.str(), ", stride=", this->options.stride.str(),
               ". Fix: output_padding picks among the output sizes one stride allows.");
  weight = register_parameter(
      "weight", Tensor::empty(weight_shape(in_channels, out_channels / this->options.groups,
                                           this->kernel_size, spatial_dims)));
  bias = register_parameter("bias", this->options.bias ? Tensor::empty({out_channels}) : Tensor());
  reset_parameters();
}

void ConvTransposeNd::reset_parameters() {
  reset_conv(weight, bias);
}

Tensor ConvTransposeNd::forward(const Tensor& input) {
  return forward(input, {});
}

Tensor ConvTransposeNd::forward(const Tensor& input, IntList output_size) {
  const auto name = conv_name(spatial_dims_, true);
  detail::check_floating_input(input, weight.dtype(), name);
  const ConvTransposeOptions& o = options;
  IntArg output_padding = o.output_padding;
  if (!output_size.empty()) {
    const size_t n = spatial_dims_;
    KILN_CHECK(output_size.size() == n || output_size.size() == n + 2, "[", name, "] expected an output_size of ",
               n, " (or ", n + 2, ") entries, got ", shape_str(output_size), ".");
    KILN_CHECK(input.dim() >= static_cast<int64_t>(n), "[", name, "] expected an input with ", n,
               " spatial dims, got ", input.type_str(), ".");
    std::vector<int64_t> padding_for_size;
    for (size_t i = 0; i < n; ++i) {
      const int64_t in = input.size(input.dim() - static_cast<int64_t>(n) + static_cast<int64_t>(i));
      const int64_t want = output_size[output_size.size() - n + i];
      const int64_t smallest = (in - 1) * o.stride.at(i) - 2 * o.padding.at(i) +
                               o.dilation.at(i) * (kernel_size.at(i) - 1) + 1;
      const int64_t largest = smallest + o.stride.at(i) - 1;
      KILN_CHECK(want >= smallest && want <= largest, "[", name, "] requested an output size of ",
                 shape_str(output_size), ", but spatial dim ", i, " can only be ", smallest, " to ", largest,
                 " for an input of ", input.type_str(), ". Fix: ask for a size in that range, or change the "
                 "stride or padding.");
      padding_for_size.push_back(want - smallest);
    }
    output_padding = IntArg(std::move(padding_for_size));
  }
  switch (spatial_dims_) {
    case 1:
      return F::conv_transpose1d(input, weight, bias, o.stride, o.padding, output_padding, o.groups,
                                 o.dilation);
    case 2:
      return F::conv_transpose2d(input, weight, bias, o.stride, o.padding, output_padding, o.groups,
                                 o.dilation);
    default:
      return F::conv_transpose3d(input, weight, bias, o.stride, o.padding, output_padding, o.groups,
                                 o.dilation);
  }
}

std::string ConvTransposeNd::extra_repr() const {
  const size_t d = spatial_dims_;
  const ConvTransposeOptions& o = options;
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.tuple_str(d) + ", stride=" + o.stride.tuple_str(d);
  if (!all_equal(o.padding, d, 0)) s += ", padding=" + o.padding.tuple_str(d);
  if (!all_equal(o.output_padding, d, 0)) s += ", output_padding=" + o.output_padding.tuple_str(d);
  if (!all_equal(o.dilation, d, 1)) s += ", dilation=" + o.dilation.tuple_str(d);
  if (o.groups != 1) s += ", groups=" + std::to_string(o.groups);
  if (!bias.defined()) s += ", bias=false";
  return s;
}

}  // namespace kiln::nn
