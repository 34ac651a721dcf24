// nn::Embedding: a lookup table [num_embeddings, embedding_dim] initialized from N(0, 1);
// the padding_idx row starts at zero and receives no gradient.
#pragma once

#include <optional>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct EmbeddingOptions {
  std::optional<int64_t> padding_idx{};  // negative counts from the end
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});

  // int64 indices of any shape -> [*indices, embedding_dim].
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t num_embeddings;
  int64_t embedding_dim;
  std::optional<int64_t> padding_idx;  // normalized to [0, num_embeddings)
  Tensor weight;
};

}  // namespace kiln::nn
