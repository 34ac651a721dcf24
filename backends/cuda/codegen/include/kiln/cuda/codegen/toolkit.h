// What the GPU code generator takes from the CUDA toolkit, found at run time: libdevice (the
// math functions, linked into every PTX module) and ptxas (PTX to a cubin, the machine code of
// one GPU architecture). Neither needs a GPU. Plain C++, no MLIR.
#pragma once

#include <string>

namespace kiln::cuda::codegen {

// The toolkit's root: $KILN_CUDA_HOME when set (the only one looked at then), else the first
// of $CUDA_HOME, $CUDA_PATH and /usr/local/cuda that exists; "" when there is none.
std::string toolkit_root();

// libdevice's bitcode: $KILN_LIBDEVICE, else <toolkit>/nvvm/libdevice/libdevice.10.bc, else
// Debian's /usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc. Throws kiln::Error naming
// every path looked at, and the fix.
std::string find_libdevice();

// ptxas: $KILN_PTXAS, else <toolkit>/bin/ptxas, else the first on $PATH; "" when none.
std::string find_ptxas();

struct Cubin {
  std::string image;  // the ELF image cuModuleLoadData takes
  std::string log;    // ptxas's messages (with -v: registers and shared memory per kernel)
};

// Assembles `ptx` for `chip` ("sm_90") with ptxas (-O3; `verbose` adds -v). Throws kiln::Error
// with ptxas's messages when it rejects the PTX, and when there is no ptxas (the paths looked
// at, and the fix).
Cubin assemble_cubin(const std::string& ptx, const std::string& chip, bool verbose = false);

}  // namespace kiln::cuda::codegen
