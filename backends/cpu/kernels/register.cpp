// register_kernels(): one call that fills every CPU kernel slot.
#include "kiln/cpu/kernels/register.h"

#include "kernels.h"

namespace kiln::cpu::kernels {

void register_kernels() {
  static const bool done = [] {
    register_elementwise_kernels();
    register_copy_kernels();
    register_reduction_kernels();
    register_linalg_kernels();
    register_factory_kernels();
    register_nn_kernels();
    register_layout_kernels();
    register_cumulative_kernels();
    register_sort_kernels();
    register_selection_kernels();
    return true;
  }();
  (void)done;
}

}  // namespace kiln::cpu::kernels
