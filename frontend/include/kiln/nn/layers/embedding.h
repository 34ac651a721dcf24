// nn::Embedding: a lookup table [num_embeddings, embedding_dim] initialized from N(0, 1);
// the padding_idx row starts at zero and receives no gradient. nn::EmbeddingBag: the sum,
// mean or max of each bag of looked-up rows, without materializing the rows per bag.
#pragma once

#include <optional>
#include <string>

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

struct EmbeddingBagOptions {
  std::string mode = "mean";  // "sum", "mean" or "max"
  // offsets has one more entry than there are bags: the end of the last one (PyTorch's
  // include_last_offset).
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx{};  // entries with this index are left out of their bag
};

// PyTorch's nn.EmbeddingBag (no max_norm, scale_grad_by_freq or sparse gradients). Bags are
// the rows of a 2-D input [B, L], or runs of a 1-D input [L] that start at offsets [B]. An
// empty bag gives zeros.
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, EmbeddingBagOptions options = {});

  Tensor forward(const Tensor& input) override;  // a 2-D input
  // -> [B, embedding_dim]. per_sample_weights (the input's shape) scale each row, mode "sum"
  // only, as PyTorch.
  Tensor forward(const Tensor& input, const Tensor& offsets,
                 const Tensor& per_sample_weights = Tensor());
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t num_embeddings;
  int64_t embedding_dim;
  EmbeddingBagOptions options;
  Tensor weight;
};

}  // namespace kiln::nn
