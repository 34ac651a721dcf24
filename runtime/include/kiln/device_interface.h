// How the runtime reaches memory on devices other than the CPU. The runtime knows no GPU: a
// backend (kiln_cuda) registers an interface for its device type when kiln starts, and
// storage, copies between devices and host reads of a device tensor (item(), to_vector(),
// printing) go through it. Without one, each of these says what is missing.
#pragma once

#include <cstddef>

#include "kiln/device.h"

namespace kiln {

class Tensor;

class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;
  // At least `nbytes` of memory on `device`; never null (throws kiln::Error, e.g. when the
  // device is out of memory or absent).
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, Device device) = 0;
  // Copies `nbytes` of contiguous memory; either side may be the CPU. It is ordered after the
  // work queued on the device so far, and returns once the host may read `dst` and reuse
  // `src`.
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t nbytes) = 0;
};

// Installs the interface of a device type (not the CPU). The interface is not owned and must
// live until the process exits; registering again replaces it.
void register_device_interface(DeviceType type, DeviceInterface* interface);
// The interface for `device`'s type; throws kiln::Error naming the device when none is
// registered.
DeviceInterface& device_interface(Device device);

// Copies `nbytes` of contiguous memory between any two devices (a memcpy when both are the
// CPU), through the interface of the device side.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

namespace detail {
// The elements `t` views, copied to `to` with the same sizes and strides (only the span of
// storage the view covers travels, so item() of one element copies one element).
Tensor copy_view_span(const Tensor& t, Device to);
}  // namespace detail

}  // namespace kiln
