// Definitions of the pooling ops.
#include "kiln/ops/pool.h"

#include "kiln/ops/infer_util.h"
#include "nn_infer.h"

namespace kiln::ops {

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceil_mode) {
  constexpr std::string_view kWhat = "pooling: the padded input or the dilated window";
  const int64_t padded = size_add(in, size_mul(2, pad, kWhat), kWhat);
  const int64_t window = size_mul(dilation, kernel - 1, kWhat);
  const int64_t span = size_add(padded - window - 1, ceil_mode ? stride - 1 : 0, kWhat);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

namespace {

// Checks the window parameters against x's spatial size and returns the output shape.
Shape pooled_shape(const InferCall& c, IntList x, IntList kernel, IntList stride, IntList pad,
                   IntList dilation, bool ceil_mode) {
  const char* op = c.op.name.c_str();
  infer::check_pair(c, kernel, "kernel_size", 1);
  infer::check_pair(c, stride, "stride", 1);
  infer::check_pair(c, pad, "padding", 0);
  infer::check_pair(c, dilation, "dilation", 1);
  // PyTorch's limit: half the effective (dilated) kernel, so every window overlaps the input.
  for (int i = 0; i < 2; ++i)
    KILN_CHECK(pad[i] <= size_add(size_mul(kernel[i] - 1, dilation[i], op), 1, op) / 2, "[", op,
               "] padding should be at most half of the (dilated) kernel size, got padding=",
               shape_str(pad), " for kernel_size=", shape_str(kernel),
               " and dilation=", shape_str(dilation), ". Fix: use padding <= kernel_size / 2.");
  Shape out{x[0], x[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    out[2 + i] = pool_output_size(x[2 + i], kernel[i], stride[i], pad[i], dilation[i], ceil_mode);
    KILN_CHECK(out[2 + i] >= 1, "[", op, "] the output would be empty: input ", shape_str(x),
               " with kernel_size=", shape_str(kernel), ", padding=", shape_str(pad),
               ", dilation=", shape_str(dilation), " gives ", out[2 + i], " along ",
               i == 0 ? "height" : "width", ". Fix: use a smaller kernel or a larger input.");
  }
  return out;
}

void check_grad(const InferCall& c, IntList want) {
  KILN_CHECK(Shape(c.inputs[0].sizes()) == Shape(want), "[", c.op.name,
             "] expected grad of the pooled shape ", shape_str(want), ", got ",
             c.inputs[0].type_str(), ".");
}

Shape input_shape(const Tensor& grad, IntList hw, const char* op) {
  KILN_CHECK(hw.size() == 2, "[", op, "] expected input_size (H, W), got ", shape_str(hw), ".");
  return Shape{grad.size(0), grad.size(1), hw[0], hw[1]};
}

void infer_max_pool2d(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_image(c, false);
  const auto& a = static_cast<const MaxPool2dAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  Shape out =
      pooled_shape(c, x.sizes(), a.kernel_size, a.stride, a.padding, a.dilation, a.ceil_mode);
  c.outputs.push_back({x.dtype(), out, x.device()});
  c.outputs.push_back({DType::Int64, out, x.device()});
}

void infer_max_pool2d_backward(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_image(c, false);
  KILN_CHECK(c.inputs[1].dtype() == DType::Int64 &&
                 Shape(c.inputs[1].sizes()) == Shape(c.inputs[0].sizes()),
             "[max_pool2d_backward] expected int64 indices of the gradient's shape ",
             shape_str(c.inputs[0].sizes()), ", got ", c.inputs[1].type_str(), ".");
  const auto& a = static_cast<const PoolBackwardSizeAttrs&>(c.attrs);
  c.outputs.push_back({c.inputs[0].dtype(),
                       input_shape(c.inputs[0], a.input_size, "max_pool2d_backward"),
                       c.inputs[0].device()});
}

void check_avg_attrs(const InferCall& c, const AvgPool2dAttrs& a) {
  KILN_CHECK(!a.divisor_override || *a.divisor_override != 0, "[", c.op.name,
             "] divisor_override must be non-zero. Fix: pass none to divide by the window size.");
}

void infer_avg_pool2d(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_image(c, false);
  const auto& a = static_cast<const AvgPool2dAttrs&>(c.attrs);
  check_avg_attrs(c, a);
  const Tensor& x = c.inputs[0];
  Shape out = pooled_shape(c, x.sizes(), a.kernel_size, a.stride, a.padding, {1, 1}, a.ceil_mode);
  c.outputs.push_back({x.dtype(), out, x.device()});
}

void infer_avg_pool2d_backward(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_image(c, false);
  const auto& b = static_cast<const AvgPool2dBackwardAttrs&>(c.attrs);
  const AvgPool2dAttrs& a = b.pool;
  check_avg_attrs(c, a);
  Shape in = input_shape(c.inputs[0], b.input_size, "avg_pool2d_backward");
  check_grad(c, pooled_shape(c, in, a.kernel_size, a.stride, a.padding, {1, 1}, a.ceil_mode));
  c.outputs.push_back({c.inputs[0].dtype(), in, c.inputs[0].device()});
}

void infer_adaptive_avg_pool2d(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_image(c, false);
  const auto& a = static_cast<const AdaptivePool2dAttrs&>(c.attrs);
  infer::check_pair(c, a.output_size, "output_size", 1);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.size(2) > 0 && x.size(3) > 0,
             "[adaptive_avg_pool2d] expected a non-empty plane, got ", x.type_str(), ".");
  c.outputs.push_back(
      {x.dtype(), Shape{x.size(0), x.size(1), a.output_size[0], a.output_size[1]}, x.device()});
}

void infer_adaptive_avg_pool2d_backward(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_image(c, false);
  const auto& a = static_cast<const PoolBackwardSizeAttrs&>(c.attrs);
  infer::check_pair(c, a.input_size, "input_size", 1);
  c.outputs.push_back({c.inputs[0].dtype(),
                       input_shape(c.inputs[0], a.input_size, "adaptive_avg_pool2d_backward"),
                       c.inputs[0].device()});
}

}  // namespace

OpDef max_pool2d("max_pool2d", {"x"}, infer_max_pool2d, LoweringClass::Opaque,
                 attrs_of<MaxPool2dAttrs>(), {.optional_outputs = 0b10});
OpDef max_pool2d_backward("max_pool2d_backward", {"grad", "indices"}, infer_max_pool2d_backward,
                          LoweringClass::Opaque, attrs_of<PoolBackwardSizeAttrs>(),
                          {.nondiff_inputs = 0b10});
OpDef avg_pool2d("avg_pool2d", {"x"}, infer_avg_pool2d, LoweringClass::Opaque,
                 attrs_of<AvgPool2dAttrs>());
OpDef avg_pool2d_backward("avg_pool2d_backward", {"grad"}, infer_avg_pool2d_backward,
                          LoweringClass::Opaque, attrs_of<AvgPool2dBackwardAttrs>());
OpDef adaptive_avg_pool2d("adaptive_avg_pool2d", {"x"}, infer_adaptive_avg_pool2d,
                          LoweringClass::Opaque, attrs_of<AdaptivePool2dAttrs>());
OpDef adaptive_avg_pool2d_backward("adaptive_avg_pool2d_backward", {"grad"},
                                   infer_adaptive_avg_pool2d_backward, LoweringClass::Opaque,
                                   attrs_of<PoolBackwardSizeAttrs>());

}  // namespace kiln::ops
