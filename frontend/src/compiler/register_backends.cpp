// The backends kiln's code generator adds to the registry. Lives in kiln_compiler (which links
// LLVM/MLIR); kiln/compile.h calls it before main in programs linked with kiln::kiln.
#include "kiln/backends/cpu_compiler.h"
#include "kiln/compile.h"

namespace kiln::detail {

bool register_compiler_backends() {
  cpu::register_backend();
  return true;
}

}  // namespace kiln::detail
