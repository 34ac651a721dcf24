// GPU kernels for fusion groups: each exec::FusedKernelSpec (the same specs the CPU code
// generator compiles) becomes a kernel of the MLIR gpu dialect, lowered through NVVM to PTX for
// one NVIDIA architecture. No GPU is needed: the PTX is text, which the driver compiles for
// the GPU it runs on (kiln/cuda/codegen/toolkit.h assembles it ahead of time with ptxas).
// A plain C++ interface: no MLIR or LLVM type crosses it.
//
// Every kernel takes the same parameters, so one launcher serves all of them: the device
// pointers of the region's inputs, then of its outputs (exec::FusedKernelSpec's layout, dense
// row-major), then one int64 per iteration dim (every dim, static ones too).
//   elementwise kernels: a grid-stride loop over the flattened iteration space, one element
//     per thread per step;
//   row kernels: a grid-stride loop over rows, one block per row at a time; the block's threads
//     stride along the row, and each reduction (sum, amax, amin) ends in a block-wide
//     reduction (warp shuffles, then shared memory), so every thread holds the row's value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/cpu/exec/kernel_spec.h"

namespace kiln::cuda::codegen {

struct PtxOptions {
  // The architecture the PTX is generated for: "sm_90" (H100/H200). The driver compiles PTX
  // for its own GPU when that is newer; an older GPU refuses it.
  std::string chip = "sm_90";
  int opt_level = 3;      // LLVM's NVPTX optimization level
  bool keep_ir = false;   // keep the generated MLIR (gpu dialect, before lowering)
  // NVIDIA's libdevice bitcode (the math functions); empty: find_libdevice()
  // (kiln/cuda/codegen/toolkit.h).
  std::string libdevice;
};

enum class KernelKind { Elementwise, Rows };

// One kernel of a PtxModule and what launching it needs.
struct PtxKernel {
  std::string name;  // the PTX entry's name: the spec's
  KernelKind kind = KernelKind::Elementwise;
  size_t buffers = 0;  // pointer parameters: the region's inputs, then its outputs
  size_t dims = 0;     // int64 parameters after them: the iteration dims
};

struct PtxTimings {
  double build_ms = 0;  // the MLIR context and the kernels' gpu dialect module
  double lower_ms = 0;  // MLIR passes to NVVM, LLVM's NVPTX back end, the PTX text
};

struct PtxModule {
  std::string ptx;   // the PTX text of every kernel (no trailing NUL)
  std::string chip;  // what it targets ("sm_90")
  std::vector<PtxKernel> kernels;
  std::string mlir_text;  // empty unless PtxOptions::keep_ir
  PtxTimings timings;

  // The kernel named `name`; throws kiln::Error naming the kernels the module has.
  const PtxKernel& kernel(const std::string& name) const;
};

// Generates and lowers all `kernels` into one PTX module (LLVM runs once). Throws kiln::Error
// for a spec the generator cannot compile (the kernel and op named, with the fix: the same
// checks and dtypes as the CPU code generator), for libdevice missing (the paths looked at), and
// with MLIR's diagnostics if lowering fails.
PtxModule compile_ptx(std::span<const cpu::exec::FusedKernelSpec> kernels,
                      const PtxOptions& options = {});

// The grid of one launch: `block` threads per block, `grid` blocks.
struct LaunchGeometry {
  int64_t grid = 1;
  int64_t block = 1;
};

// How to launch `kernel` over iteration dims `dims` on a GPU with `multiprocessors` SMs:
// elementwise kernels run 256-thread blocks, enough of them to fill every SM several times
// (the grid-stride loop covers the rest); row kernels one block per row up to the same
// limit, with as many threads as the row has elements, rounded up to whole warps (32 to 1024).
LaunchGeometry launch_geometry(const PtxKernel& kernel, std::span<const int64_t> dims,
                               int multiprocessors);

}  // namespace kiln::cuda::codegen
