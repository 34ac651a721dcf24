// The GPU kernels run on the CPU, for testing the code generator where there is no GPU. Each
// kernel is emitted by the same code as for the GPU (the same loops, offsets, loads, stores and
// scalar bodies), for a grid of one-thread blocks: a block-wide reduction is then that thread's
// own value, and the grid-stride loops still split the work across the emulated blocks. What
// this cannot show: threads of one block cooperating (the reductions' shuffles and shared
// memory) and libdevice's math (the CPU's libm stands in). tests/gpu/device_check.sh runs the
// real kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kiln/cpu/exec/kernel_spec.h"

namespace kiln::cuda::codegen {

class EmulatedKernels {
 public:
  virtual ~EmulatedKernels() = default;
  // Runs kernel `name` over iteration dims `dims` as `blocks` one-thread blocks (each block's
  // share, one after the other). `buffers` are host pointers, laid out as on the GPU.
  virtual void run(const std::string& name, std::span<void* const> buffers,
                   std::span<const int64_t> dims, int64_t blocks) const = 0;
};

// JIT-compiles the emulated kernels of `kernels` for this CPU. Throws kiln::Error as
// compile_ptx does, and for an unknown name or wrong argument counts in run().
std::unique_ptr<EmulatedKernels> emulate_on_cpu(std::span<const cpu::exec::FusedKernelSpec> kernels);

}  // namespace kiln::cuda::codegen
