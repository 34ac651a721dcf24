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

// to_device's kernel: copies input 0 into output 0, whatever their devices. A strided view on
// a device is made dense, and a strided destination written, through the host; a device
// layer's clone kernel falls back to it for what its own kernels do not cover.
void copy_across_devices(KernelCall& c);

}  // namespace kiln::ops
