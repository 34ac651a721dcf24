// How a kernel reports bad data (an index out of range, a probability outside [0, 1]) so the
// host can raise the CPU kernel's kiln::Error: it records the first failing element in a
// one-element int64 GPU tensor with kiln_atomic_min (the GPU prelude), and the host reads it
// back after the launch, one synchronization per call (where PyTorch asserts on the device,
// which poisons the context).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::cuda {

// A flag on `device` that holds "none yet", for one launch.
Tensor failure_flag(Device device);
// The first failing element the kernel recorded, if any (waits for the kernel).
std::optional<int64_t> first_failure(const Tensor& flag);

}  // namespace kiln::cuda
