// CPU kernels for the layout ops.
#include "kernels.h"
#include "loops.h"

namespace kiln::cpu {

void register_layout_kernels() {}

}  // namespace kiln::cpu
