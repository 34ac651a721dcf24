// Registration of the eager CPU kernels: each file fills the CPU slot of its ops.
#pragma once

namespace kiln::cpu::kernels {

void register_elementwise_kernels();
void register_copy_kernels();
void register_reduction_kernels();
void register_linalg_kernels();
void register_factory_kernels();
void register_nn_kernels();
// The neural-network kernel files, registered by register_nn_kernels().
void register_softmax_kernels();
void register_attention_kernels();
void register_loss_kernels();
void register_norm_kernels();
void register_conv_kernels();
void register_pool_kernels();
void register_dropout_kernels();
void register_embedding_kernels();
void register_pad_kernels();
void register_layout_kernels();
void register_cumulative_kernels();
void register_sort_kernels();
void register_selection_kernels();

}  // namespace kiln::cpu::kernels
