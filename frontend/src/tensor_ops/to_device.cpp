// Tensor::to(device) and kiln::to_device through the to_device op, and its vjp: the gradient
// goes back to the input's device.
#include "kiln/tensor_ops/device.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/to_device.h"

namespace kiln {

Tensor to_device(const Tensor& x, Device device, bool copy) {
  if (device == x.device() && !copy) return x;
  ops::ToDeviceAttrs a;
  a.device = device;
  return detail::call1(ops::to_device, {x}, a);
}

Tensor Tensor::to(Device device) const { return to_device(*this, device); }

namespace {
Tensors vjp_to_device(const VjpCall& c) {
  return Tensors{c.grad_outputs[0].to(c.input_types[0].device)};
}
}  // namespace

namespace detail {
void register_to_device_vjp() {
  set_vjp(ops::to_device, vjp_to_device, kSavesNothing);
}
}  // namespace detail

}  // namespace kiln
