// Checking index tensors on the GPU (index_kernels.cpp): a kernel finds the first index out of
// range, and the host reads back just that one (failure_flag.h), so a kernel's error can name
// the index as the CPU kernel's does.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::cuda {

struct BadIndex {
  int64_t element, value;  // where in the index tensor (row-major), and the index there
};

// The first element of the contiguous int64 GPU tensor `index` outside [0, size) (and not
// `allowed`, e.g. an ignore_index); nothing when all are in range.
std::optional<BadIndex> first_bad_index(const Tensor& index, int64_t size,
                                        std::optional<int64_t> allowed = std::nullopt);

}  // namespace kiln::cuda
