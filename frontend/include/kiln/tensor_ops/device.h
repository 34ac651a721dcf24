// Moving tensors between devices. x.to(device) is the everyday form; to_device adds PyTorch's
// copy=True. Either is an op: the gradient goes back to the input's device, and a trace
// records the move.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// `x` on `device`: x itself when it is there already (unless `copy`), else a contiguous copy.
Tensor to_device(const Tensor& x, Device device, bool copy = false);

}  // namespace kiln
