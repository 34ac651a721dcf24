// Checking index tensors on the GPU (index_kernels.cpp): a kernel finds the first index out of
// range, and the host reads back just that one (failure_flag.h), so a kernel's error can name
// the index as the CPU kernel's does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::cuda {

struct BadIndex {
  int64_t element, value;  // where in the index tensor (row-major), and the index there
};

// Calls `report` (which throws the op's error) with the first element of the contiguous int64
// GPU tensor `index` outside [0, size) and not `allowed` (an ignore_index), if any: at once,
// or after each replay of a CUDA graph being captured (failure_flag.h's check_failure).
void check_indices(const Tensor& index, int64_t size, std::optional<int64_t> allowed,
                   std::function<void(const BadIndex&)> report);

}  // namespace kiln::cuda
