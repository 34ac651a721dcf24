// Definitions of conv2d and its gradient ops.
#include "kiln/ops/conv.h"

#include <string>

#include "kiln/ops/infer_util.h"
#include "nn_infer.h"

namespace kiln::ops {

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                         int64_t dilation) {
  constexpr std::string_view kWhat = "conv2d: the padded input or the dilated kernel";
  const int64_t padded = size_add(in, size_mul(2, pad, kWhat), kWhat);
  const int64_t span = size_add(size_mul(dilation, kernel - 1, kWhat), 1, kWhat);
  return (padded - span) / stride + 1;
}

namespace {

template <class A>
void check_params(const InferCall& c, const A& a) {
  infer::check_pair(c, a.stride, "stride", 1);
  infer::check_pair(c, a.padding, "padding", 0);
  infer::check_pair(c, a.dilation, "dilation", 1);
  KILN_CHECK(a.groups >= 1, "[", c.op.name, "] expected groups >= 1, got ", a.groups, ".");
}

// Checks x [N, C, H, W] against weight [OC, C/groups, kh, kw] and returns the output shape.
Shape conv_shape(const InferCall& c, IntList x, IntList w, const Conv2dAttrs& a) {
  const char* op = c.op.name.c_str();
  KILN_CHECK(w.size() == 4, "[", op,
             "] expected a 4-D weight [out_channels, in_channels / groups, kh, kw], got ",
             shape_str(w), ".");
  KILN_CHECK(x.size() == 4, "[", op, "] expected a 4-D input [N, C, H, W], got ", shape_str(x),
             ". Fix: add a batch dim with unsqueeze(0).");
  const int64_t channels =
      size_mul(w[1], a.groups, std::string("[") + op + "] the weight's channels");
  KILN_CHECK(x[1] == channels, "[", op, "] the input has ", x[1], " channels (", shape_str(x),
             ") but the weight ", shape_str(w), " with groups=", a.groups, " expects ", channels,
             ". Fix: give the layer in_channels=", x[1], " (weight dim 1 = in_channels / groups).");
  KILN_CHECK(w[0] % a.groups == 0, "[", op, "] out_channels=", w[0],
             " is not divisible by groups=", a.groups, ". Fix: use a multiple of groups.");
  Shape out{x[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const std::string what = std::string("[") + op + "] the padded input or the dilated kernel";
    const int64_t padded = size_add(x[2 + i], size_mul(2, a.padding[i], what), what);
    const int64_t span = size_add(size_mul(a.dilation[i], w[2 + i] - 1, what), 1, what);
    KILN_CHECK(padded >= span, "[", op, "] the kernel (", w[2], "x", w[3], ", dilation ",
               shape_str(a.dilation), ", spanning ", span,
               ") is larger than the padded input along ", i == 0 ? "height" : "width", " (",
               x[2 + i], " + 2*", a.padding[i], " = ", padded,
               "). Fix: use a larger input, more padding or a "
               "smaller kernel.");
    out[2 + i] = conv_output_size(x[2 + i], w[2 + i], a.stride[i], a.padding[i], a.dilation[i]);
  }
  return out;
}

Conv2dAttrs forward_attrs(const Conv2dGradAttrs& g) {
  Conv2dAttrs a;
  a.stride = g.stride, a.padding = g.padding, a.dilation = g.dilation, a.groups = g.groups;
  return a;
}

void infer_conv2d(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 3, "[conv2d] expected 3 inputs (x, weight, bias), got ",
             c.inputs.size(), ".");
  KILN_CHECK(infer::has_input(c, 0) && infer::has_input(c, 1),
             "[conv2d] x and weight must be defined.");
  infer::check_floating(c, 0);
  const auto& a = static_cast<const Conv2dAttrs&>(c.attrs);
  check_params(c, a);
  const Tensor &x = c.inputs[0], &w = c.inputs[1];
  KILN_CHECK(w.dtype() == x.dtype(), "[conv2d] expected the weight in the input's dtype ",
             x.dtype(), ", got ", w.dtype(), ". Fix: convert one of them with .to().");
  Shape out = conv_shape(c, x.sizes(), w.sizes(), a);
  infer::check_optional_vector(c, 2, w.size(0), "output channel");
  c.outputs.push_back({x.dtype(), out, x.device()});
}

// Both gradient ops: input 0 is grad_out; input 1 is the weight (input_grad) or x
// (weight_grad); `size` is the other operand's shape. grad_out must match the forward shape.
void infer_conv2d_grad(InferCall& c, bool input_grad) {
  infer::check_arity(c, 2);
  infer::check_floating(c, 0);
  infer::check_same_dtype(c);
  const auto& g = static_cast<const Conv2dGradAttrs&>(c.attrs);
  check_params(c, g);
  Conv2dAttrs a = forward_attrs(g);
  IntList x = input_grad ? IntList(g.size) : c.inputs[1].sizes();
  IntList w = input_grad ? c.inputs[1].sizes() : IntList(g.size);
  Shape out = conv_shape(c, x, w, a);
  KILN_CHECK(Shape(c.inputs[0].sizes()) == out, "[", c.op.name,
             "] expected grad of the convolution's output shape ", shape_str(out), ", got ",
             c.inputs[0].type_str(), ".");
  c.outputs.push_back({c.inputs[0].dtype(), g.size, c.inputs[0].device()});
}

void infer_conv2d_input_grad(InferCall& c) {
  infer_conv2d_grad(c, true);
}
void infer_conv2d_weight_grad(InferCall& c) {
  infer_conv2d_grad(c, false);
}

}  // namespace

OpDef conv2d("conv2d", {"x", "weight", "bias"}, infer_conv2d, LoweringClass::Contraction,
             attrs_of<Conv2dAttrs>());
OpDef conv2d_input_grad("conv2d_input_grad", {"grad", "weight"}, infer_conv2d_input_grad,
                        LoweringClass::Contraction, attrs_of<Conv2dGradAttrs>());
OpDef conv2d_weight_grad("conv2d_weight_grad", {"grad", "x"}, infer_conv2d_weight_grad,
                         LoweringClass::Contraction, attrs_of<Conv2dGradAttrs>());

}  // namespace kiln::ops
