// TransformerClassifier: a small pre-norm Transformer encoder over an image's rows. Each of
// the 28 rows of a 28x28 image is a token of 28 pixels; a Linear embeds it, a learned
// position embedding is added, the encoder mixes the tokens, their mean feeds a Linear head.
// State paths: embed.weight, pos_embedding, encoder.layers.0.self_attn.in_proj_weight, ...,
// encoder.norm.weight, head.weight.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/models/config.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/layers/transformer.h"
#include "kiln/nn/module.h"

namespace kiln::models {

struct TransformerClassifierConfig {
  int64_t image_size = 28;  // tokens per image and pixels per token
  int64_t d_model = 64;
  int64_t nhead = 4;
  int64_t num_layers = 2;
  int64_t dim_feedforward = 128;
  double dropout = 0.1;
  int64_t num_classes = 10;
  template <class V>
  void fields(V& v) {
    v("image_size", image_size);
    v("d_model", d_model);
    v("nhead", nhead);
    v("num_layers", num_layers);
    v("dim_feedforward", dim_feedforward);
    v("dropout", dropout);
    v("num_classes", num_classes);
  }
};

class TransformerClassifier : public nn::Module {
 public:
  explicit TransformerClassifier(const TransformerClassifierConfig& config);
  // [N, 1, S, S] or [N, S, S] images (S = image_size) -> logits [N, num_classes].
  Tensor forward(const Tensor& x) override;

  TransformerClassifierConfig config;
  nn::ModulePtr<nn::Linear> embed;
  Tensor pos_embedding;  // [1, image_size, d_model]
  nn::ModulePtr<nn::TransformerEncoder> encoder;
  nn::ModulePtr<nn::Linear> head;
};

std::shared_ptr<TransformerClassifier> build(const TransformerClassifierConfig& config);

}  // namespace kiln::models
