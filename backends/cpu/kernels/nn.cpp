// Registration of the neural-network CPU kernels (one file per concept: softmax, loss,
// norm, conv, pool, dropout, embedding, pad).
#include "kernels.h"

namespace kiln::cpu::kernels {

void register_nn_kernels() {
  register_softmax_kernels();
  register_attention_kernels();
  register_loss_kernels();
  register_norm_kernels();
  register_conv_kernels();
  register_pool_kernels();
  register_dropout_kernels();
  register_embedding_kernels();
  register_pad_kernels();
}

}  // namespace kiln::cpu::kernels
