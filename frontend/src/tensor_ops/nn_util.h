// Shared by the kiln::nn::functional implementation files: window-parameter expansion, loss
// reductions, and the vjp registration function of each file (nn.cpp calls them all).
#pragma once

#include <string>

#include "kiln/tensor.h"

namespace kiln::detail {

// One value for both spatial dims, or two (height, width); empty gives `fallback`.
Shape nn_pair(IntList v, const char* name, const char* fn, IntList fallback = {});

// Applies a loss reduction: "mean", "sum" or "none".
Tensor nn_reduce(const Tensor& loss, const std::string& reduction, const char* fn);
void nn_check_reduction(const std::string& reduction, const char* fn);

// Runs `fn` on x with a batch dim added when x is [C, H, W] (PyTorch's unbatched inputs).
template <class F>
auto with_batch_dim(const Tensor& x, const char* name, F fn) {
  KILN_CHECK(x.defined(), "[", name, "] the input is undefined.");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, "[", name,
             "] expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got ", x.type_str(),
             ". Fix: reshape the input to [N, C, H, W].");
  return fn(x.dim() == 3 ? x.unsqueeze(0) : x, x.dim() == 3);
}

void register_softmax_vjps();
void register_attention_vjps();
void register_loss_vjps();
void register_norm_vjps();
void register_conv_vjps();
void register_pool_vjps();
void register_dropout_vjps();
void register_embedding_vjps();
void register_pad_vjps();

}  // namespace kiln::detail
