// pad and the vjps of pad and pad_backward. Constant padding's gradient is the opposite
// (negative) constant pad, a crop; the other modes fold the gradient with pad_backward.
#include "kiln/ops/pad.h"

#include "../call.h"
#include "kiln/nn/functional.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

Tensor pad(const Tensor& x, IntList pad, const std::string& mode, double value) {
  KILN_CHECK(x.defined(), "[pad] the input is undefined.");
  KILN_CHECK(mode == "constant" || value == 0,
             "[pad] a fill value only applies to mode \"constant\", got mode \"", mode,
             "\" with value ", value, ".");
  ops::PadAttrs a;
  a.pad = Shape(pad);
  a.mode = mode;
  a.value = value;
  return kiln::detail::call1(ops::pad, {x}, a);
}

}  // namespace nn::functional

namespace {

Tensors vjp_pad(const VjpCall& c) {
  const auto& a = static_cast<const ops::PadAttrs&>(c.attrs);
  if (a.mode != "constant")
    return Tensors{detail::call1(ops::pad_backward, {c.grad_outputs[0]}, a)};
  ops::PadAttrs crop;
  for (int64_t p : a.pad) crop.pad.push_back(-p);
  return Tensors{detail::call1(ops::pad, {c.grad_outputs[0]}, crop)};
}

// pad_backward is linear; its adjoint is the padding itself.
Tensors vjp_pad_backward(const VjpCall& c) {
  return Tensors{
      detail::call1(ops::pad, {c.grad_outputs[0]}, static_cast<const ops::PadAttrs&>(c.attrs))};
}

}  // namespace

namespace detail {
void register_pad_vjps() {
  set_vjp(ops::pad, vjp_pad, kSavesNothing);
  set_vjp(ops::pad_backward, vjp_pad_backward, kSavesNothing);
}
}  // namespace detail

}  // namespace kiln
