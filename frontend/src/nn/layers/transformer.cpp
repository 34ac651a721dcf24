// nn::TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
// TransformerDecoder and Transformer, as PyTorch's: post-norm x = norm1(x + sa(x));
// x = norm2(x + ff(x)) (the decoder layer: self-attention, cross-attention to the memory, the
// feed-forward block), or pre-norm with norm_first.
#include "kiln/nn/layers/transformer.h"

#include <memory>

#include <limits>

#include "kiln/autograd.h"
#include "kiln/nn/init.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"

namespace kiln::nn {

const char* transformer_activation_name(TransformerActivation activation) {
  return activation == TransformerActivation::GELU ? "gelu" : "relu";
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 TransformerEncoderLayerOptions options)
    : d_model(d_model), nhead(nhead), options(std::move(options)) {
  const TransformerEncoderLayerOptions& o = this->options;
  KILN_CHECK(o.dim_feedforward > 0, "[TransformerEncoderLayer] expected a positive ",
             "dim_feedforward, got ", o.dim_feedforward,
             ". Fix: pass the hidden width of the feed-forward block (PyTorch's default: 2048).");
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(
                       d_model, nhead,
                       MultiheadAttentionOptions{
                           .dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first}));
  linear1 =
      register_module("linear1", std::make_shared<Linear>(d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 =
      register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d_model, o.bias));
  LayerNormOptions norm_options{.eps = o.layer_norm_eps, .bias = o.bias};
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(d_model, norm_options));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(d_model, norm_options));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask,
                                                     const Tensor& padding, bool is_causal) {
  auto [out, weights] = self_attn(x, x, x,
                                  MhaCallOptions{.key_padding_mask = padding,
                                                 .need_weights = false,
                                                 .attn_mask = mask,
                                                 .is_causal = is_causal});
  return dropout1(out);
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = linear1(x);
  h = options.activation == TransformerActivation::GELU ? kiln::gelu(h) : kiln::relu(h);
  return dropout2(linear2(dropout(h)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  if (options.norm_first) {
    x = x + self_attention_block(norm1(x), src_mask, src_key_padding_mask, is_causal);
    x = x + feed_forward_block(norm2(x));
  } else {
    x = norm1(x + self_attention_block(x, src_mask, src_key_padding_mask, is_causal));
    x = norm2(x + feed_forward_block(x));
  }
  return x;
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) {
  return forward(src, Tensor());
}

TransformerEncoder::TransformerEncoder(
    const std::shared_ptr<TransformerEncoderLayer>& encoder_layer, int64_t num_layers,
    std::shared_ptr<Module> norm)
    : num_layers(num_layers) {
  KILN_CHECK(encoder_layer != nullptr, "[TransformerEncoder] got no encoder layer. Fix: pass ",
             "std::make_shared<TransformerEncoderLayer>(d_model, nhead, options).");
  KILN_CHECK(num_layers >= 0, "[TransformerEncoder] expected num_layers >= 0, got ", num_layers,
             ". Fix: pass the number of layers to stack.");
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->push_back(nn::clone(encoder_layer));  // deep copies, as PyTorch's
  if (norm) this->norm = register_module("norm", std::move(norm));
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask,
                                   const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layers->at<TransformerEncoderLayer>(static_cast<int64_t>(i))(x, mask, src_key_padding_mask,
                                                                     is_causal);
  }
  if (norm) x = norm(x);
  return x;
}

Tensor TransformerEncoder::forward(const Tensor& src) {
  return forward(src, Tensor());
}

// ---- decoder ----

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead,
                                                 TransformerDecoderLayerOptions options)
    : d_model(d_model), nhead(nhead), options(std::move(options)) {
  const TransformerDecoderLayerOptions& o = this->options;
  KILN_CHECK(o.dim_feedforward > 0, "[TransformerDecoderLayer] expected a positive ",
             "dim_feedforward, got ", o.dim_feedforward,
             ". Fix: pass the hidden width of the feed-forward block (PyTorch's default: 2048).");
  MultiheadAttentionOptions attention{.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first};
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, attention));
  multihead_attn =
      register_module("multihead_attn", std::make_shared<MultiheadAttention>(d_model, nhead, attention));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d_model, o.bias));
  LayerNormOptions norm_options{.eps = o.layer_norm_eps, .bias = o.bias};
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(d_model, norm_options));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(d_model, norm_options));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(d_model, norm_options));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerDecoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = linear1(x);
  h = options.activation == TransformerActivation::GELU ? kiln::gelu(h) : kiln::relu(h);
  return dropout3(linear2(dropout(h)));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const Tensor& tgt_mask, const Tensor& memory_mask,
                                        const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                        bool memory_is_causal) {
  auto self_block = [&](const Tensor& x) {
    return dropout1(self_attn(x, x, x,
                              MhaCallOptions{.key_padding_mask = tgt_key_padding_mask,
                                             .need_weights = false,
                                             .attn_mask = tgt_mask,
                                             .is_causal = tgt_is_causal})
                        .first);
  };
  auto cross_block = [&](const Tensor& x) {
    return dropout2(multihead_attn(x, memory, memory,
                                   MhaCallOptions{.key_padding_mask = memory_key_padding_mask,
                                                  .need_weights = false,
                                                  .attn_mask = memory_mask,
                                                  .is_causal = memory_is_causal})
                        .first);
  };
  Tensor x = tgt;
  if (options.norm_first) {
    x = x + self_block(norm1(x));
    x = x + cross_block(norm2(x));
    x = x + feed_forward_block(norm3(x));
  } else {
    x = norm1(x + self_block(x));
    x = norm2(x + cross_block(x));
    x = norm3(x + feed_forward_block(x));
  }
  return x;
}

Tensor TransformerDecoderLayer::forward(const Tensor&) {
  KILN_FAIL("[TransformerDecoderLayer] needs the encoder's output as well as the target. Fix: "
            "call nn::call(layer, tgt, memory) (with masks as further arguments).");
}

TransformerDecoder::TransformerDecoder(
    const std::shared_ptr<TransformerDecoderLayer>& decoder_layer, int64_t num_layers,
    std::shared_ptr<Module> norm)
    : num_layers(num_layers) {
  KILN_CHECK(decoder_layer != nullptr, "[TransformerDecoder] got no decoder layer. Fix: pass ",
             "std::make_shared<TransformerDecoderLayer>(d_model, nhead, options).");
  KILN_CHECK(num_layers >= 0, "[TransformerDecoder] expected num_layers >= 0, got ", num_layers,
             ". Fix: pass the number of layers to stack.");
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->push_back(nn::clone(decoder_layer));
  if (norm) this->norm = register_module("norm", std::move(norm));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                   const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                   bool memory_is_causal) {
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerDecoderLayer>(static_cast<int64_t>(i))(
        x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
        tgt_is_causal, memory_is_causal);
  if (norm) x = norm(x);
  return x;
}

Tensor TransformerDecoder::forward(const Tensor&) {
  KILN_FAIL("[TransformerDecoder] needs the encoder's output as well as the target. Fix: call "
            "nn::call(decoder, tgt, memory) (with masks as further arguments).");
}

// ---- Transformer ----

Transformer::Transformer(int64_t d_model, int64_t nhead, TransformerOptions options)
    : d_model(d_model), nhead(nhead), options(options) {
  TransformerEncoderLayerOptions layer{.dim_feedforward = options.dim_feedforward,
                                       .dropout = options.dropout,
                                       .activation = options.activation,
                                       .layer_norm_eps = options.layer_norm_eps,
                                       .batch_first = options.batch_first,
                                       .norm_first = options.norm_first,
                                       .bias = options.bias};
  LayerNormOptions norm{.eps = options.layer_norm_eps, .bias = options.bias};
  encoder = register_module(
      "encoder", std::make_shared<TransformerEncoder>(
                     std::make_shared<TransformerEncoderLayer>(d_model, nhead, layer),
                     options.num_encoder_layers, std::make_shared<LayerNorm>(d_model, norm)));
  decoder = register_module(
      "decoder", std::make_shared<TransformerDecoder>(
                     std::make_shared<TransformerDecoderLayer>(d_model, nhead, layer),
                     options.num_decoder_layers, std::make_shared<LayerNorm>(d_model, norm)));
  for (auto& [name, p] : named_parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask,
                            const Tensor& tgt_mask, const Tensor& memory_mask,
                            const Tensor& src_key_padding_mask, const Tensor& tgt_key_padding_mask,
                            const Tensor& memory_key_padding_mask, bool src_is_causal,
                            bool tgt_is_causal, bool memory_is_causal) {
  const int64_t batch_dim = options.batch_first ? 0 : 1;
  KILN_CHECK(src.dim() != 3 || tgt.dim() != 3 || src.size(batch_dim) == tgt.size(batch_dim),
             "[Transformer] expected src and tgt with the same batch size, got ", src.type_str(),
             " and ", tgt.type_str(), options.batch_first ? " (batch_first)" : "",
             ". Fix: pass one target sequence per source sequence.");
  KILN_CHECK(src.size(-1) == d_model && tgt.size(-1) == d_model, "[Transformer] expected src and "
             "tgt with d_model = ", d_model, " features, got ", src.type_str(), " and ",
             tgt.type_str(), ". Fix: embed the tokens to d_model first.");
  Tensor memory = encoder(src, src_mask, src_key_padding_mask, src_is_causal);
  return decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                    memory_key_padding_mask, tgt_is_causal, memory_is_causal);
}

Tensor Transformer::forward(const Tensor&) {
  KILN_FAIL("[Transformer] needs a source and a target sequence. Fix: call "
            "nn::call(transformer, src, tgt) (with masks as further arguments).");
}

Tensor Transformer::generate_square_subsequent_mask(int64_t size) {
  return triu(full({size, size}, -std::numeric_limits<double>::infinity()), 1);
}

}  // namespace kiln::nn
