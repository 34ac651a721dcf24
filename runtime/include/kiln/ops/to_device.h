// to_device: a contiguous copy of a tensor on another device (Tensor::to(device)). Being an
// op, it is differentiable (the gradient goes back to the input's device) and traced.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct ToDeviceAttrs : AttrsOf<ToDeviceAttrs> {
  Device device;
  template <class V>
  void fields(V& v) {
    v("device", device);
  }
};
extern OpDef to_device;

// to_device's kernel: copies input 0 into output 0 (contiguous), whatever their devices. A
// strided view on a device is made dense through the host. A device layer uses it as its
// clone kernel until it has copy kernels of its own.
void copy_across_devices(KernelCall& c);

}  // namespace kiln::ops
