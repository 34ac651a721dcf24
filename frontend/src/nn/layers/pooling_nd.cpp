// nn::MaxPool1d/3d, AvgPool1d/3d, AdaptiveAvgPool1d, AdaptiveMaxPool2d and MaxUnpool2d.
#include "../layer_util.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers/pooling.h"

namespace kiln::nn {

namespace F = kiln::nn::functional;

MaxPoolNd::MaxPoolNd(size_t spatial_dims, IntArg kernel_size, MaxPool2dOptions options)
    : kernel_size(std::move(kernel_size)), options(std::move(options)), spatial_dims_(spatial_dims) {}

Tensor MaxPoolNd::forward(const Tensor& input) {
  const MaxPool2dOptions& o = options;
  return spatial_dims_ == 1
             ? F::max_pool1d(input, kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode)
             : F::max_pool3d(input, kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
}

std::string MaxPoolNd::extra_repr() const {
  const IntArg& stride = options.stride.empty() ? kernel_size : options.stride;
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() +
         ", padding=" + options.padding.str() + ", dilation=" + options.dilation.str() +
         ", ceil_mode=" + detail::bool_str(options.ceil_mode);
}

AvgPoolNd::AvgPoolNd(size_t spatial_dims, IntArg kernel_size, AvgPool2dOptions options)
    : kernel_size(std::move(kernel_size)), options(std::move(options)), spatial_dims_(spatial_dims) {
  KILN_CHECK(spatial_dims == 3 || !this->options.divisor_override, "[AvgPool1d] takes no "
             "divisor_override (as PyTorch's). Fix: divide the sum yourself, or use AvgPool2d.");
}

Tensor AvgPoolNd::forward(const Tensor& input) {
  const AvgPool2dOptions& o = options;
  return spatial_dims_ == 1 ? F::avg_pool1d(input, kernel_size, o.stride, o.padding, o.ceil_mode,
                                            o.count_include_pad)
                            : F::avg_pool3d(input, kernel_size, o.stride, o.padding, o.ceil_mode,
                                            o.count_include_pad, o.divisor_override);
}

std::string AvgPoolNd::extra_repr() const {
  const IntArg& stride = options.stride.empty() ? kernel_size : options.stride;
  return "kernel_size=" + kernel_size.str() + ", stride=" + stride.str() +
         ", padding=" + options.padding.str();
}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(int64_t output_size) : output_size(output_size) {}

Tensor AdaptiveAvgPool1d::forward(const Tensor& input) {
  return F::adaptive_avg_pool1d(input, output_size);
}

std::string AdaptiveAvgPool1d::extra_repr() const {
  return "output_size=" + std::to_string(output_size);
}

AdaptiveMaxPool2d::AdaptiveMaxPool2d(IntArg output_size) : output_size(std::move(output_size)) {}

Tensor AdaptiveMaxPool2d::forward(const Tensor& input) {
  return F::adaptive_max_pool2d(input, output_size);
}

std::string AdaptiveMaxPool2d::extra_repr() const {
  return "output_size=" + output_size.str();
}

MaxUnpool2d::MaxUnpool2d(IntArg kernel_size, MaxUnpool2dOptions options)
    : kernel_size(std::move(kernel_size)), options(std::move(options)) {}

Tensor MaxUnpool2d::forward(const Tensor& input, const Tensor& indices) {
  return F::max_unpool2d(input, indices, kernel_size, options.stride, options.padding);
}

Tensor MaxUnpool2d::forward(const Tensor& input, const Tensor& indices, IntList output_size) {
  return F::max_unpool2d(input, indices, kernel_size, options.stride, options.padding,
                         output_size);
}

std::string MaxUnpool2d::extra_repr() const {
  const IntArg& stride = options.stride.empty() ? kernel_size : options.stride;
  return "kernel_size=" + kernel_size.pair_str() + ", stride=" + stride.pair_str() +
         ", padding=" + options.padding.pair_str();
}

}  // namespace kiln::nn
