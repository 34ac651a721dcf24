// TransformerClassifier.
#include "kiln/models/transformer_classifier.h"

#include "config_checks.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layers/layer_norm.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::models {

TransformerClassifier::TransformerClassifier(const TransformerClassifierConfig& cfg) : config(cfg) {
  const char* name = "TransformerClassifierConfig";
  detail::check_positive(name, "image_size", cfg.image_size);
  detail::check_positive(name, "d_model", cfg.d_model);
  detail::check_positive(name, "nhead", cfg.nhead);
  KILN_CHECK(cfg.d_model % cfg.nhead == 0, "[", name,
             "] expected d_model divisible by nhead, "
             "found d_model = ",
             cfg.d_model, ", nhead = ", cfg.nhead,
             ". Fix: pick nhead among the divisors of d_model.");
  detail::check_positive(name, "num_layers", cfg.num_layers);
  detail::check_positive(name, "dim_feedforward", cfg.dim_feedforward);
  detail::check_probability(name, "dropout", cfg.dropout);
  detail::check_positive(name, "num_classes", cfg.num_classes);
  embed = register_module("embed", std::make_shared<nn::Linear>(cfg.image_size, cfg.d_model));
  pos_embedding = register_parameter("pos_embedding", zeros({1, cfg.image_size, cfg.d_model}));
  // Small random positions (as ViT): distinct from the start, without swamping the pixels.
  nn::init::trunc_normal_(pos_embedding, 0.0, 0.02);
  // Pre-norm layers train stably without warm-up; the final LayerNorm closes the residual path.
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(
      cfg.d_model, cfg.nhead,
      nn::TransformerEncoderLayerOptions{.dim_feedforward = cfg.dim_feedforward,
                                         .dropout = cfg.dropout,
                                         .activation = nn::TransformerActivation::GELU,
                                         .batch_first = true,
                                         .norm_first = true});
  encoder = register_module(
      "encoder", std::make_shared<nn::TransformerEncoder>(
                     layer, cfg.num_layers, std::make_shared<nn::LayerNorm>(cfg.d_model)));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.d_model, cfg.num_classes));
}

Tensor TransformerClassifier::forward(const Tensor& x) {
  const int64_t s = config.image_size;
  KILN_CHECK((x.dim() == 4 && x.size(1) == 1 && x.size(2) == s && x.size(3) == s) ||
                 (x.dim() == 3 && x.size(1) == s && x.size(2) == s),
             "[TransformerClassifier", nn::call_context(), "] expected images [N, 1, ", s, ", ", s,
             "] or [N, ", s, ", ", s, "], found ", x.type_str(),
             ". Fix: pass single-channel images of image_size = ", s, ".");
  Tensor tokens = x.reshape({x.size(0), s, s});  // one token per image row
  Tensor h = embed(tokens) + pos_embedding;
  return head(encoder(h).mean({1}));
}

std::shared_ptr<TransformerClassifier> build(const TransformerClassifierConfig& config) {
  return std::make_shared<TransformerClassifier>(config);
}

}  // namespace kiln::models
