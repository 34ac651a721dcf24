// kiln::init(): the one place that wires the layers together at startup.
#include "kiln/init.h"

#include "autograd/record.h"
#include "kiln/cpu/kernels/register.h"
#include "kiln/cuda/device.h"
#include "kiln/interp/interp.h"
#include "vjp_registry.h"

namespace kiln {

void init() {
  static const bool done = [] {
    cpu::kernels::register_kernels();
    cuda::register_backend();  // tensors on GPUs; needs no GPU
    interp::register_backend();
    detail::register_elementwise_vjps();
    detail::register_view_vjps();
    detail::register_reduction_vjps();
    detail::register_linalg_vjps();
    detail::register_factory_vjps();
    detail::register_nn_vjps();
    detail::register_layout_vjps();
    detail::register_sort_vjps();
    detail::register_cumulative_vjps();
    detail::register_selection_vjps();
    detail::register_debug_print_vjp();
    detail::register_to_device_vjp();
    autograd::install_autograd_hook();
    return true;
  }();
  (void)done;
}

}  // namespace kiln
