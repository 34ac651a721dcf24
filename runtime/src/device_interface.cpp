// The registry of device interfaces, and copying a view's span of storage between devices.
#include "kiln/device_interface.h"

#include <array>
#include <atomic>
#include <cstring>

#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

namespace {

std::array<std::atomic<DeviceInterface*>, kNumDeviceTypes>& interfaces() {
  static std::array<std::atomic<DeviceInterface*>, kNumDeviceTypes> table{};
  return table;
}

}  // namespace

void register_device_interface(DeviceType type, DeviceInterface* interface) {
  KILN_CHECK(type != DeviceType::CPU,
             "register_device_interface: the cpu's memory is the runtime's own; register "
             "interfaces for other device types only.");
  interfaces()[static_cast<size_t>(type)].store(interface, std::memory_order_release);
}

DeviceInterface& device_interface(Device device) {
  DeviceInterface* found =
      interfaces()[static_cast<size_t>(device.type)].load(std::memory_order_acquire);
  KILN_CHECK(found, "no memory interface is registered for ", device,
             ": kiln_cuda registers it in kiln::init(), which the frontend runs before its first "
             "op. Fix: call kiln::init() (or kiln::cuda::register_backend() when using the "
             "runtime alone) before making tensors on ", device, ".");
  return *found;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  device_interface(src_device.is_cpu() ? dst_device : src_device)
      .copy_bytes(dst, dst_device, src, src_device, nbytes);
}

namespace detail {

Tensor copy_view_span(const Tensor& t, Device to) {
  const TensorImpl& impl = *t.impl();
  const int64_t itemsize = static_cast<int64_t>(t.element_size());
  // The lowest and highest element offsets the view touches (strides may be zero).
  int64_t low = impl.offset, high = impl.offset;
  for (size_t d = 0; d < impl.sizes.size(); ++d) {
    if (impl.sizes[d] == 0) return Tensor::empty(impl.sizes, impl.dtype, to);
    const int64_t reach = impl.strides[d] * (impl.sizes[d] - 1);
    (reach < 0 ? low : high) += reach;
  }
  const int64_t span = high - low + 1;
  Tensor dst = Tensor::empty({span}, impl.dtype, to);
  const char* src = static_cast<const char*>(impl.storage->data()) + low * itemsize;
  copy_bytes(dst.impl()->storage->data(), to, src, t.device(), static_cast<size_t>(span * itemsize));
  return dst.alias(impl.sizes, impl.strides, impl.offset - low);
}

}  // namespace detail

}  // namespace kiln
