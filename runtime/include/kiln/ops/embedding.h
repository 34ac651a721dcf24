// embedding: row lookup in a table, and its backward (rows of the gradient summed into
// the rows they were read from), which is linear in the gradient and has embedding as vjp.
#pragma once

#include <optional>

#include "kiln/op.h"

namespace kiln::ops {

struct EmbeddingAttrs : AttrsOf<EmbeddingAttrs> {
  std::optional<int64_t> padding_idx;  // in [0, num_weights); its row receives no gradient
  template <class V>
  void fields(V& v) {
    v("padding_idx", padding_idx);
  }
};
// embedding(weight [num_weights, D], indices int) -> [*indices.shape, D]. Indices outside
// [0, num_weights) are an error (the kernel names the index and the table size).
extern OpDef embedding;

struct EmbeddingBackwardAttrs : AttrsOf<EmbeddingBackwardAttrs> {
  int64_t num_weights = 0;
  std::optional<int64_t> padding_idx;
  template <class V>
  void fields(V& v) {
    v("num_weights", num_weights), v("padding_idx", padding_idx);
  }
};
// embedding_backward(grad [*indices.shape, D], indices) -> [num_weights, D]; the padding
// row stays zero.
extern OpDef embedding_backward;

}  // namespace kiln::ops
