// register_cpu_kernels(): one call that fills every CPU kernel slot.
#include "kernels.h"
#include "kiln/backends/cpu.h"

namespace kiln::cpu {

void register_cpu_kernels() {
  static const bool done = [] {
    register_elementwise_kernels();
    register_copy_kernels();
    register_reduction_kernels();
    register_linalg_kernels();
    register_factory_kernels();
    register_nn_kernels();
    register_layout_kernels();
    return true;
  }();
  (void)done;
}

}  // namespace kiln::cpu
