// Inside backends/cuda: the loaded driver for a device, checked and made current.
#pragma once

#include "kiln/cuda/driver.h"

namespace kiln::cuda {

// The driver API, after checking that a GPU is available and `index` names one; throws
// kiln::Error (with the reason or the valid range) otherwise.
const driver::Api& require_device(int index);

// require_device(index), with that device's primary context current on this thread.
const driver::Api& use_device(int index);

}  // namespace kiln::cuda
