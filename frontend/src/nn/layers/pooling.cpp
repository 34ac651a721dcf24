// nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d.
#include "kiln/nn/layers/pooling.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

namespace F = kiln::nn::functional;

MaxPool2d::MaxPool2d(IntArg kernel_size, MaxPool2dOptions options)
    : kernel_size(std::move(kernel_size)), options(std::move(options)) {}

Tensor MaxPool2d::forward(const Tensor& input) {
  return F::max_pool2d(input, kernel_size, options.stride, options.padding, options.dilation,
                       options.ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  const IntArg& stride = options.stride.empty() ? kernel_size : options.stride;
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() +
         ", padding=" + options.padding.str() + ", dilation=" + options.dilation.str() +
         ", ceil_mode=" + detail::bool_str(options.ceil_mode);
}

AvgPool2d::AvgPool2d(IntArg kernel_size, AvgPool2dOptions options)
    : kernel_size(std::move(kernel_size)), options(std::move(options)) {}

Tensor AvgPool2d::forward(const Tensor& input) {
  return F::avg_pool2d(input, kernel_size, options.stride, options.padding, options.ceil_mode,
                       options.count_include_pad, options.divisor_override);
}

std::string AvgPool2d::extra_repr() const {
  const IntArg& stride = options.stride.empty() ? kernel_size : options.stride;
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() +
         ", padding=" + options.padding.str();
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntArg output_size) : output_size(std::move(output_size)) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  return F::adaptive_avg_pool2d(input, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=" + output_size.str();
}

}  // namespace kiln::nn
