// How a kernel reports bad data (an index out of range, a probability outside [0, 1]) so the
// host can raise the CPU kernel's kiln::Error: it records the first failing element in a
// one-element int64 GPU tensor with kiln_atomic_min (the GPU prelude), and the host reads it
// back after the launch, one synchronization per call (where PyTorch asserts on the device,
// which poisons the context). While a CUDA graph is captured the read waits: the graph reads
// the flag after each replay (graph_capture.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::cuda {

// A flag on `device` that holds "none yet", for one launch.
Tensor failure_flag(Device device);
// The first failing element the kernel recorded, if any (waits for the kernel).
std::optional<int64_t> first_failure(const Tensor& flag);

// Throws the kernel's error for the first failing element it recorded in `flag`, by calling
// `report(element)`: now, or, while this thread captures a CUDA graph, after each replay of
// it (CapturedGraph::check_after_replay). `report` may read the kernel's inputs back; a
// deferred one keeps them (the graph's buffers) alive.
void check_failure(const Tensor& flag, std::function<void(int64_t element)> report);

}  // namespace kiln::cuda
