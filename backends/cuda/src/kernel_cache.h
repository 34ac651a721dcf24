// The generated eager kernels of the process, by GPU and key: made on first use (source, then
// NVRTC for the GPU's architecture, then the driver) and kept, like PyTorch's jiterator
// kernels: there are a few per op and dtype.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kiln/cuda/fused_kernels.h"
#include "kiln/dtype.h"

namespace kiln::cuda {

struct GeneratedKernel {
  std::string name;  // the kernel's entry in `module`
  std::unique_ptr<FusedKernelModule> module;
};

// The kernel for `key` on GPU `device`; on a miss, `make_source(name)` writes its CUDA C with
// an entry named `name` (which starts with `prefix`). Thread-safe.
const GeneratedKernel& generated_kernel(int device, const std::string& key,
                                        const std::string& prefix,
                                        const std::function<std::string(const std::string&)>& make_source);

// The kernel of a family whose kernels differ by kind and dtype alone (factories, index,
// norm, pool and conv kernels): key "what(dtype)", source source_of(kind, dtype, name).
template <class Kind, class SourceOf>
const GeneratedKernel& kernel_of_kind(int device, const char* what, Kind kind, DType dtype, SourceOf&& source_of) {
  return generated_kernel(device, std::string(what) + "(" + std::string(dtype_name(dtype)) + ")", what,
                          [&](const std::string& name) { return source_of(kind, dtype, name); });
}

// Queues `kernel` on the current stream with `params` (each pointing at a parameter): over `n`
// elements (256-thread blocks, a grid-stride loop), or over `rows` rows of `row_length`
// elements (a block per row, whole warps as many as the row needs, up to 1024).
void launch_over_elements(const GeneratedKernel& kernel, int64_t n, void** params);
void launch_over_rows(const GeneratedKernel& kernel, int64_t rows, int64_t row_length, void** params);

}  // namespace kiln::cuda
