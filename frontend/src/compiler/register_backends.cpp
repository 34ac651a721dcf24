// The backends kiln's code generator adds to the registry. Lives in kiln_compiler (which links
// LLVM/MLIR); kiln/compile.h calls it before main in programs linked with kiln::kiln.
#include "kiln/compile.h"
#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/cuda/compiler/cuda_backend.h"

namespace kiln::detail {

bool register_compiler_backends() {
  cpu::compiler::register_backend();
  cuda::compiler::register_backend();  // needs no GPU until a graph of GPU tensors compiles
  return true;
}

}  // namespace kiln::detail
