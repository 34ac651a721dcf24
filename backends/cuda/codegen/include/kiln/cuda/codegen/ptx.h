// GPU kernels for fusion groups: each exec::FusedKernelSpec (the same specs the CPU code
// generator compiles) becomes a kernel of the MLIR gpu dialect, lowered through NVVM to PTX for
// one NVIDIA architecture. No GPU is needed: the PTX is text, which the driver compiles for
// the GPU it runs on (kiln/cuda/codegen/toolkit.h assembles it ahead of time with ptxas).
// A plain C++ interface: no MLIR or LLVM type crosses it.
//
// Every kernel takes the same parameters, so one launcher (kiln/cuda/fused_kernels.h) serves
// all of them: the device pointers of the region's inputs, then of its outputs
// (exec::FusedKernelSpec's layout, dense row-major), then one int64 per iteration dim (every
// dim, static ones too).
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
#include "kiln/cuda/fused_kernels.h"

namespace kiln::cuda::codegen {

using cuda::FusedKernelInfo;
using cuda::FusedKernelKind;

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

struct PtxTimings {
  double build_ms = 0;  // the MLIR context and the kernels' gpu dialect module
  double lower_ms = 0;  // MLIR passes to NVVM, LLVM's NVPTX back end, the PTX text
};

struct PtxModule {
  std::string ptx;   // the PTX text of every kernel (no trailing NUL)
  std::string chip;  // what it targets ("sm_90")
  std::vector<FusedKernelInfo> kernels;  // how to launch each (kiln/cuda/fused_kernels.h)
  std::string mlir_text;  // empty unless PtxOptions::keep_ir
  PtxTimings timings;

  // The kernel named `name`; throws kiln::Error naming the kernels the module has.
  const FusedKernelInfo& kernel(const std::string& name) const;
};

// Whether kernels can compute in dtype `t` (the CPU code generator's set); the fusion rules
// of the backend "cuda" ask it.
bool supported_dtype(DType t);

// Generates and lowers all `kernels` into one PTX module (LLVM runs once). Throws kiln::Error
// for a spec the generator cannot compile (the kernel and op named, with the fix: the same
// checks and dtypes as the CPU code generator), for libdevice missing (the paths looked at), and
// with MLIR's diagnostics if lowering fails.
PtxModule compile_ptx(std::span<const cpu::exec::FusedKernelSpec> kernels,
                      const PtxOptions& options = {});

}  // namespace kiln::cuda::codegen
