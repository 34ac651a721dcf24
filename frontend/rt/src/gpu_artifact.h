// kiln_rt on a GPU: what is checked before anything of a GPU artifact ("device": "cuda") is
// loaded, and how its kernels reach the GPU. The driver is loaded only here, so a CPU
// artifact runs on machines without one.
#pragma once

#include <memory>
#include <string>

#include "kiln/artifact/manifest.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/ir/graph.h"

namespace kiln::rt {

// Installs kiln's CUDA device layer (once) and throws kiln::Error unless GPU 0 runs the
// artifact's kernels: a GPU is present and its compute capability is the target's (sm_90)
// or newer.
void check_gpu(const artifact::Manifest& m, const std::string& dir);

// The kernels of `graph` loaded on GPU 0: the cubin when the GPU is of the target's
// generation, else the PTX, which the driver compiles for the newer GPU. Throws when the PTX
// does not target the manifest's architecture (a file swapped for another artifact's).
std::shared_ptr<cuda::FusedKernelModule> load_gpu_kernels(const artifact::Manifest& m,
                                                          const ir::Graph& graph,
                                                          const std::string& ptx,
                                                          const std::string& cubin,
                                                          const std::string& dir);

}  // namespace kiln::rt
