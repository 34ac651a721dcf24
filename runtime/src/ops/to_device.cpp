// to_device's entry and its kernel, which serves every pair of devices: the bytes move in one
// contiguous copy through the device interface (kiln/device_interface.h).
#include "kiln/ops/to_device.h"

#include "kiln/device_interface.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/view.h"

namespace kiln::ops {

namespace {

void infer_to_device(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), static_cast<const ToDeviceAttrs&>(c.attrs).device});
}

// The cpu's clone kernel writing `in` into `out` (both on the cpu; `out` may be strided).
void clone_on_cpu(const Tensor& in, Tensor out) {
  KernelFn copy = clone.kernels[static_cast<size_t>(DeviceType::CPU)];
  KILN_CHECK(copy, "[to_device] the cpu's clone kernel is not registered. Fix: call kiln::init().");
  const TensorTypes types = {{out.dtype(), Shape(out.sizes()), kCPU}};
  KernelCall call{clone, std::span<const Tensor>(&in, 1), no_attrs(), std::span<Tensor>(&out, 1),
                  types};
  copy(call);
}

// `t` on the cpu: itself, or the span of storage its view covers, copied over.
Tensor on_host(const Tensor& t) {
  return t.device().is_cpu() ? t : detail::copy_view_span(t, kCPU);
}

}  // namespace

void copy_across_devices(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  if (x.numel() == 0) return;
  if (out.is_contiguous()) {
    // A strided source is made dense on the host; the bytes then move in one copy, and no
    // device needs a kernel of its own.
    Tensor dense = x;
    if (!x.is_contiguous()) {
      dense = Tensor::empty(x.sizes(), x.dtype());
      clone_on_cpu(on_host(x), dense);
    }
    copy_bytes(out.raw_data(), out.device(), dense.raw_data(), dense.device(), out.nbytes());
    return;
  }
  // A strided destination (copy_ into a view of a device tensor): the span of storage it
  // covers comes to the host, the cpu writes the view there, and the span goes back.
  Tensor host_out = on_host(out);
  clone_on_cpu(on_host(x), host_out);
  if (out.device().is_cpu()) return;
  const Storage& span = *host_out.impl()->storage;
  const int64_t low = out.storage_offset() - host_out.storage_offset();
  char* dst = static_cast<char*>(out.impl()->storage->data()) +
              low * static_cast<int64_t>(out.element_size());
  copy_bytes(dst, out.device(), span.data(), kCPU, span.nbytes());
}

OpDef to_device("to_device", {"x"}, infer_to_device, LoweringClass::Opaque,
                attrs_of<ToDeviceAttrs>(), {.every_device_kernel = copy_across_devices});

}  // namespace kiln::ops
