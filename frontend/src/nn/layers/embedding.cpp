// nn::Embedding.
#include "kiln/nn/layers/embedding.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  KILN_CHECK(num_embeddings > 0 && embedding_dim >= 0,
             "[Embedding] expected num_embeddings > 0 "
             "and embedding_dim >= 0, got Embedding(",
             num_embeddings, ", ", embedding_dim,
             "). Fix: pass the vocabulary size and the vector width.");
  if (options.padding_idx) {
    int64_t p = *options.padding_idx;
    KILN_CHECK(p >= -num_embeddings && p < num_embeddings, "[Embedding] padding_idx ", p,
               " is outside [", -num_embeddings, ", ", num_embeddings,
               "). Fix: pass an index of a row of the table.");
    padding_idx = p < 0 ? p + num_embeddings : p;
  }
  weight = register_parameter("weight", Tensor::empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  NoGradGuard no_grad;
  Tensor w = weight.detach();
  w.copy_(kiln::randn(w.sizes()));
  if (padding_idx) w.select(0, *padding_idx).zero_();
}

Tensor Embedding::forward(const Tensor& indices) {
  return functional::embedding(indices, weight, padding_idx);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

EmbeddingBag::EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim,
                           EmbeddingBagOptions options)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim), options(std::move(options)) {
  KILN_CHECK(num_embeddings > 0 && embedding_dim >= 0,
             "[EmbeddingBag] expected num_embeddings > 0 and embedding_dim >= 0, got "
             "EmbeddingBag(", num_embeddings, ", ", embedding_dim,
             "). Fix: pass the vocabulary size and the vector width.");
  const std::string& mode = this->options.mode;
  KILN_CHECK(mode == "sum" || mode == "mean" || mode == "max",
             "[EmbeddingBag] expected mode \"sum\", \"mean\" or \"max\", got \"", mode,
             "\". Fix: pass one of them.");
  if (auto& p = this->options.padding_idx) {
    KILN_CHECK(*p >= -num_embeddings && *p < num_embeddings, "[EmbeddingBag] padding_idx ", *p,
               " is outside [", -num_embeddings, ", ", num_embeddings,
               "). Fix: pass an index of a row of the table.");
    if (*p < 0) *p += num_embeddings;
  }
  weight = register_parameter("weight", Tensor::empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void EmbeddingBag::reset_parameters() {
  NoGradGuard no_grad;
  Tensor w = weight.detach();
  w.copy_(kiln::randn(w.sizes()));
  if (options.padding_idx) w.select(0, *options.padding_idx).zero_();
}

Tensor EmbeddingBag::forward(const Tensor& input) {
  return forward(input, Tensor());
}

Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets,
                             const Tensor& per_sample_weights) {
  return functional::embedding_bag(input, weight, offsets, options.mode, per_sample_weights,
                                   options.include_last_offset, options.padding_idx);
}

std::string EmbeddingBag::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) +
                  ", mode='" + options.mode + "'";
  if (options.include_last_offset) s += ", include_last_offset=true";
  if (options.padding_idx) s += ", padding_idx=" + std::to_string(*options.padding_idx);
  return s;
}

}  // namespace kiln::nn
