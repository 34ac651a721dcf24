// max_pool2d, avg_pool2d and adaptive_avg_pool2d, and the vjps of the pooling ops. The
// backward ops are linear in the gradient: avg/adaptive backward have the forward pooling
// as vjp, and max_pool2d_backward a gather of the argmax (an embedding lookup).
#include "kiln/ops/pool.h"

#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/embedding.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/view.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size,
                                                  IntList stride, IntList padding, IntList dilation,
                                                  bool ceil_mode) {
  ops::MaxPool2dAttrs a;
  a.kernel_size = kiln::detail::nn_pair(kernel_size, "kernel_size", "max_pool2d");
  a.stride = kiln::detail::nn_pair(stride, "stride", "max_pool2d", a.kernel_size);
  a.padding = kiln::detail::nn_pair(padding, "padding", "max_pool2d");
  a.dilation = kiln::detail::nn_pair(dilation, "dilation", "max_pool2d");
  a.ceil_mode = ceil_mode;
  return kiln::detail::with_batch_dim(x, "max_pool2d", [&](const Tensor& x4, bool unbatched) {
    Tensors out = kiln::detail::call(ops::max_pool2d, Tensors{x4}, a);
    if (unbatched) return std::pair<Tensor, Tensor>(out[0].squeeze(0), out[1].squeeze(0));
    return std::pair<Tensor, Tensor>(out[0], out[1]);
  });
}

Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  ops::AvgPool2dAttrs a;
  a.kernel_size = kiln::detail::nn_pair(kernel_size, "kernel_size", "avg_pool2d");
  a.stride = kiln::detail::nn_pair(stride, "stride", "avg_pool2d", a.kernel_size);
  a.padding = kiln::detail::nn_pair(padding, "padding", "avg_pool2d");
  a.ceil_mode = ceil_mode;
  a.count_include_pad = count_include_pad;
  a.divisor_override = divisor_override;
  return kiln::detail::with_batch_dim(x, "avg_pool2d", [&](const Tensor& x4, bool unbatched) {
    Tensor y = kiln::detail::call1(ops::avg_pool2d, {x4}, a);
    return unbatched ? y.squeeze(0) : y;
  });
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size) {
  return kiln::detail::with_batch_dim(
      x, "adaptive_avg_pool2d", [&](const Tensor& x4, bool unbatched) {
        ops::AdaptivePool2dAttrs a;
        a.output_size = kiln::detail::nn_pair(output_size, "output_size", "adaptive_avg_pool2d");
        for (int i = 0; i < 2; ++i)
          if (a.output_size[i] == -1) a.output_size[i] = x4.size(2 + i);  // PyTorch's None
        Tensor y = kiln::detail::call1(ops::adaptive_avg_pool2d, {x4}, a);
        return unbatched ? y.squeeze(0) : y;
      });
}

}  // namespace nn::functional

namespace {

Shape spatial(IntList shape) {
  return Shape{shape[2], shape[3]};
}

Tensors vjp_max_pool2d(const VjpCall& c) {
  ops::PoolBackwardSizeAttrs b;
  b.input_size = spatial(c.input_types[0].shape);
  return Tensors{detail::call1(ops::max_pool2d_backward, {c.grad_outputs[0], c.outputs[1]}, b)};
}

// The adjoint of scattering into the argmax is reading the argmax: a gather from the
// gradient, done as an embedding lookup in its flattened planes.
Tensors vjp_max_pool2d_backward(const VjpCall& c) {
  const Tensor &gg = c.grad_outputs[0], &indices = c.inputs[1];
  const int64_t planes = gg.size(0) * gg.size(1), plane = gg.size(2) * gg.size(3);
  Tensor base = arange(0, planes * plane, plane, TensorOptions(kInt64).with_device(gg.device())).reshape({gg.size(0), gg.size(1), 1, 1});
  Tensor rows = detail::call1(ops::embedding, {gg.reshape({planes * plane, 1}), indices + base},
                              ops::EmbeddingAttrs());
  return Tensors{rows.squeeze(-1), Tensor()};
}

Tensors vjp_avg_pool2d(const VjpCall& c) {
  ops::AvgPool2dBackwardAttrs b;
  b.pool = static_cast<const ops::AvgPool2dAttrs&>(c.attrs);
  b.input_size = spatial(c.input_types[0].shape);
  return Tensors{detail::call1(ops::avg_pool2d_backward, {c.grad_outputs[0]}, b)};
}

Tensors vjp_avg_pool2d_backward(const VjpCall& c) {
  const auto& b = static_cast<const ops::AvgPool2dBackwardAttrs&>(c.attrs);
  return Tensors{detail::call1(ops::avg_pool2d, {c.grad_outputs[0]}, b.pool)};
}

Tensors vjp_adaptive_avg_pool2d(const VjpCall& c) {
  ops::PoolBackwardSizeAttrs b;
  b.input_size = spatial(c.input_types[0].shape);
  return Tensors{detail::call1(ops::adaptive_avg_pool2d_backward, {c.grad_outputs[0]}, b)};
}

Tensors vjp_adaptive_avg_pool2d_backward(const VjpCall& c) {
  ops::AdaptivePool2dAttrs a;
  a.output_size = spatial(c.input_types[0].shape);
  return Tensors{detail::call1(ops::adaptive_avg_pool2d, {c.grad_outputs[0]}, a)};
}

}  // namespace

namespace detail {
void register_pool_vjps() {
  // The pooling vjps need only shapes (in the attrs and input_types) and the argmax.
  set_vjp(ops::max_pool2d, vjp_max_pool2d, {.inputs = 0, .outputs = 0b10});
  set_vjp(ops::max_pool2d_backward, vjp_max_pool2d_backward, {.inputs = 0b10});
  set_vjp(ops::avg_pool2d, vjp_avg_pool2d, kSavesNothing);
  set_vjp(ops::avg_pool2d_backward, vjp_avg_pool2d_backward, kSavesNothing);
  set_vjp(ops::adaptive_avg_pool2d, vjp_adaptive_avg_pool2d, kSavesNothing);
  set_vjp(ops::adaptive_avg_pool2d_backward, vjp_adaptive_avg_pool2d_backward, kSavesNothing);
}
}  // namespace detail

}  // namespace kiln
