// nn::MultiheadAttention: PyTorch's nn.MultiheadAttention with the same parameter names, shapes
// and initialization, so a PyTorch state dict loads by key (in_proj_weight [3E, E],
// in_proj_bias [3E], out_proj.weight [E, E], out_proj.bias [E]).
//
//   nn::MultiheadAttention attn(512, 8, {.batch_first = true});
//   auto [out, weights] = nn::call(attn, x, x, x, {.key_padding_mask = pad});
//
// Differences from PyTorch, on purpose:
// - Only kdim = vdim = embed_dim (one packed in_proj_weight); no add_bias_kv / add_zero_attn.
// - is_causal without attn_mask applies the causal mask (PyTorch raises "Need attn_mask if
//   specifying the is_causal hint"); with attn_mask both masks apply, which equals PyTorch's
//   result whenever the hint is true.
// - out_proj is a plain Linear (PyTorch prints NonDynamicallyQuantizableLinear, a Linear
//   subclass that only exists for its quantization tooling).
// Fully masked query rows follow PyTorch: NaN in the weights path (need_weights = true: an
// explicit softmax over only -inf), zeros when need_weights = false (the safe softmax of
// scaled_dot_product_attention).
#pragma once

#include <utility>

#include "kiln/nn/layers/linear.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;      // on the attention weights, while training
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // inputs [N, L, E] instead of [L, N, E]
};

// The per-call arguments, in PyTorch's order (designated initializers must follow it).
struct MhaCallOptions {
  // bool [N, S] (or [S] unbatched): true marks a key to ignore. A floating mask is added to
  // the scores.
  Tensor key_padding_mask{};
  // Return the attention weights as the pair's second tensor (undefined otherwise).
  bool need_weights = true;
  // [L, S] or [N * num_heads, L, S] (or [num_heads, L, S] unbatched). bool: true means "may not
  // attend"; floating: added to the scores (-inf forbids).
  Tensor attn_mask{};
  // Average the weights over the heads ([N, L, S]) or keep them per head ([N, H, L, S]).
  bool average_attn_weights = true;
  // Query i attends to keys 0..i only.
  bool is_causal = false;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});

  // Module's single-tensor forward stays visible (it says to call the one below), so this
  // overload does not hide it (clang's -Woverloaded-virtual).
  using Module::forward;
  // query [L, N, E], key and value [S, N, E] ([N, L, E] / [N, S, E] with batch_first; [L, E] /
  // [S, E] unbatched). Returns the output (query's layout) and the attention weights.
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const MhaCallOptions& options = {});
  // PyTorch's: xavier_uniform_ in_proj_weight, zero in_proj_bias and out_proj.bias. out_proj's
  // weight keeps Linear's initialization.
  void reset_parameters();

  int64_t embed_dim;
  int64_t num_heads;
  int64_t head_dim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight;  // [3E, E]: the query, key and value projections stacked
  Tensor in_proj_bias;    // [3E]; undefined with bias = false
  ModulePtr<Linear> out_proj;
};

}  // namespace kiln::nn
