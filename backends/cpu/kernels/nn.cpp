// CPU kernels for the neural-network ops.
#include "kernels.h"
#include "loops.h"

namespace kiln::cpu {

void register_nn_kernels() {}

}  // namespace kiln::cpu
