// nn::TransformerEncoderLayer and nn::TransformerEncoder, as PyTorch's: post-norm
// x = norm1(x + sa(x)); x = norm2(x + ff(x)), or pre-norm with norm_first.
#include "kiln/nn/layers/transformer.h"

#include <memory>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/elementwise.h"

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

namespace {

// A new layer with the configuration, weights, trainability and mode of `layer` (PyTorch's
// encoder deep-copies its template layer).
std::shared_ptr<TransformerEncoderLayer> copy_layer(const TransformerEncoderLayer& layer) {
  auto copy = std::make_shared<TransformerEncoderLayer>(layer.d_model, layer.nhead, layer.options);
  NamedTensors from = layer.named_parameters("", true, /*remove_duplicate=*/false);
  if (!from.empty()) copy->to(from.front().second.dtype());
  NamedTensors to = copy->named_parameters("", true, /*remove_duplicate=*/false);
  KILN_CHECK(from.size() == to.size(), "[TransformerEncoder] the encoder layer has ", from.size(),
             " parameters where a TransformerEncoderLayer with its options has ", to.size(),
             ". Fix: pass an unmodified TransformerEncoderLayer as the template.");
  NoGradGuard no_grad;
  for (size_t i = 0; i < from.size(); ++i) {
    to[i].second.detach().copy_(from[i].second.detach());
    to[i].second.set_requires_grad(from[i].second.requires_grad());
  }
  copy->train(layer.is_training());
  return copy;
}

}  // namespace

TransformerEncoder::TransformerEncoder(
    const std::shared_ptr<TransformerEncoderLayer>& encoder_layer, int64_t num_layers,
    std::shared_ptr<Module> norm)
    : num_layers(num_layers) {
  KILN_CHECK(encoder_layer != nullptr, "[TransformerEncoder] got no encoder layer. Fix: pass ",
             "std::make_shared<TransformerEncoderLayer>(d_model, nhead, options).");
  KILN_CHECK(num_layers >= 0, "[TransformerEncoder] expected num_layers >= 0, got ", num_layers,
             ". Fix: pass the number of layers to stack.");
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(copy_layer(*encoder_layer));
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

}  // namespace kiln::nn
