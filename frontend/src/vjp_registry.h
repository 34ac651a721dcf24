// The frontend's vjp registration functions, one per op group; init() calls them all.
#pragma once

namespace kiln::detail {

void register_elementwise_vjps();
void register_view_vjps();
void register_reduction_vjps();
void register_linalg_vjps();
void register_factory_vjps();
void register_nn_vjps();
void register_layout_vjps();
void register_sort_vjps();
void register_cumulative_vjps();
void register_selection_vjps();
void register_debug_print_vjp();
void register_to_device_vjp();

}  // namespace kiln::detail
