// nn::TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder
// and Transformer: PyTorch's modules with the same children (self_attn, linear1, dropout,
// linear2, norm1, norm2, dropout1, dropout2; the decoder layer adds multihead_attn, norm3 and
// dropout3; layers.0..N-1 and an optional norm; Transformer's encoder and decoder), so PyTorch
// state dicts load by key.
//
//   auto layer = std::make_shared<nn::TransformerEncoderLayer>(
//       512, 8, nn::TransformerEncoderLayerOptions{.dropout = 0.1, .batch_first = true});
//   nn::TransformerEncoder encoder(layer, 6, std::make_shared<nn::LayerNorm>(512));
//   Tensor y = nn::call(encoder, x, Tensor(), padding);  // or encoder(x) without masks
//
// Differences from PyTorch: no fast path (the nested-tensor inference kernels of eval mode,
// which also write 0 at padded positions instead of their computed values); the activation is
// one of two named forms, not a callable.
#pragma once

#include <memory>
#include <string>

#include "kiln/nn/layers/dropout.h"
#include "kiln/nn/layers/layer_norm.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/layers/multihead_attention.h"
#include "kiln/nn/module.h"
#include "kiln/nn/module_list.h"

namespace kiln::nn {

// The feed-forward block's activation, as PyTorch's activation="relu" / "gelu" (GELU's exact
// erf form).
enum class TransformerActivation { ReLU, GELU };
const char* transformer_activation_name(TransformerActivation activation);  // "relu", "gelu"

struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivation activation = TransformerActivation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;  // pre-norm (x + sa(norm1(x))) instead of post-norm
  bool bias = true;         // of the linear layers, the attention and the layer norms
};

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                          TransformerEncoderLayerOptions options = {});

  // src [S, N, E] ([N, S, E] with batch_first; [S, E] unbatched); src_mask [S, S] or
  // [N * nhead, S, S] and src_key_padding_mask [N, S] as MultiheadAttention's attn_mask and
  // key_padding_mask (bool: true = masked); is_causal applies the causal mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  // Without masks (operator(), Sequential).
  Tensor forward(const Tensor& src) override;

  int64_t d_model;
  int64_t nhead;
  TransformerEncoderLayerOptions options;
  ModulePtr<MultiheadAttention> self_attn;
  ModulePtr<Linear> linear1;
  ModulePtr<Dropout> dropout;
  ModulePtr<Linear> linear2;
  ModulePtr<LayerNorm> norm1;
  ModulePtr<LayerNorm> norm2;
  ModulePtr<Dropout> dropout1;
  ModulePtr<Dropout> dropout2;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& padding,
                              bool is_causal);
  Tensor feed_forward_block(const Tensor& x);
};

class TransformerEncoder : public Module {
 public:
  // num_layers copies of encoder_layer (same options, same initial weights, as PyTorch's
  // deep copies); `norm` (e.g. a LayerNorm) runs after the last layer when given.
  TransformerEncoder(const std::shared_ptr<TransformerEncoderLayer>& encoder_layer,
                     int64_t num_layers, std::shared_ptr<Module> norm = nullptr);

  // The masks go to every layer, as in TransformerEncoderLayer::forward.
  Tensor forward(const Tensor& src, const Tensor& mask,
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor forward(const Tensor& src) override;

  int64_t num_layers;
  ModulePtr<ModuleList> layers;
  ModulePtr<Module> norm;  // empty when not given (no "norm" keys in the state dict)
};

using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

// Self-attention over the target, cross-attention to the encoder's output (memory), then the
// feed-forward block, each with its residual and norm (post-norm, or pre-norm with norm_first).
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead,
                          TransformerDecoderLayerOptions options = {});

  // tgt [T, N, E] and memory [S, N, E] ([N, T, E] / [N, S, E] with batch_first). tgt_mask
  // [T, T] and memory_mask [T, S] (or per head) as MultiheadAttention's attn_mask; the padding
  // masks [N, T] and [N, S]; tgt_is_causal / memory_is_causal apply the causal mask.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false,
                 bool memory_is_causal = false);
  // A decoder layer needs the memory: this says to call the overload above.
  Tensor forward(const Tensor& tgt) override;

  int64_t d_model;
  int64_t nhead;
  TransformerDecoderLayerOptions options;
  ModulePtr<MultiheadAttention> self_attn;
  ModulePtr<MultiheadAttention> multihead_attn;
  ModulePtr<Linear> linear1;
  ModulePtr<Dropout> dropout;
  ModulePtr<Linear> linear2;
  ModulePtr<LayerNorm> norm1;
  ModulePtr<LayerNorm> norm2;
  ModulePtr<LayerNorm> norm3;
  ModulePtr<Dropout> dropout1;
  ModulePtr<Dropout> dropout2;
  ModulePtr<Dropout> dropout3;

 private:
  Tensor feed_forward_block(const Tensor& x);
};

class TransformerDecoder : public Module {
 public:
  // num_layers copies of decoder_layer; `norm` runs after the last layer when given.
  TransformerDecoder(const std::shared_ptr<TransformerDecoderLayer>& decoder_layer,
                     int64_t num_layers, std::shared_ptr<Module> norm = nullptr);

  // The masks go to every layer, as in TransformerDecoderLayer::forward.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool tgt_is_causal = false,
                 bool memory_is_causal = false);
  Tensor forward(const Tensor& tgt) override;

  int64_t num_layers;
  ModulePtr<ModuleList> layers;
  ModulePtr<Module> norm;
};

struct TransformerOptions {
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivation activation = TransformerActivation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

// PyTorch's nn.Transformer: an encoder and a decoder stack, each ending in a LayerNorm, with
// every matrix parameter re-drawn xavier_uniform_ (as PyTorch's _reset_parameters).
class Transformer : public Module {
 public:
  explicit Transformer(int64_t d_model = 512, int64_t nhead = 8, TransformerOptions options = {});

  // src [S, N, E], tgt [T, N, E] (batch first: [N, S, E], [N, T, E]) -> [T, N, E].
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = Tensor(),
                 const Tensor& tgt_mask = Tensor(), const Tensor& memory_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor(), bool src_is_causal = false,
                 bool tgt_is_causal = false, bool memory_is_causal = false);
  Tensor forward(const Tensor& src) override;
  // float [size, size]: 0 on and below the diagonal, -inf above (PyTorch's
  // generate_square_subsequent_mask).
  static Tensor generate_square_subsequent_mask(int64_t size);

  int64_t d_model;
  int64_t nhead;
  TransformerOptions options;
  ModulePtr<TransformerEncoder> encoder;
  ModulePtr<TransformerDecoder> decoder;
};

}  // namespace kiln::nn
