// scaled_dot_product_attention: softmax(q kᵀ · scale + mask) v as one primitive, so that a
// backend can run it flash-attention style (key blocks with an online softmax) without
// ever storing the [..., L, S] score matrix.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct AttentionAttrs : AttrsOf<AttentionAttrs> {
  double scale = 1.0;      // multiplies q before the product (1/sqrt(depth) by default)
  bool is_causal = false;  // query i attends to keys j <= i only
  template <class V>
  void fields(V& v) {
    v("scale", scale), v("is_causal", is_causal);
  }
};
// scaled_dot_product_attention(query [B..., L, D], key [B..., S, D], value [B..., S, Dv],
// mask?) -> (out [B..., L, Dv], logsumexp [B..., L]). The batch dims B... of the three are
// equal; mask broadcasts to [B..., L, S] and is bool (true = may attend) or additive of
// q's dtype. A query that may attend to no key gets zeros (PyTorch's "safe softmax") and a
// logsumexp of -inf. logsumexp = log sum_j exp(scores) per query is what the vjp reads to
// rebuild the attention weights without storing them.
extern OpDef scaled_dot_product_attention;

}  // namespace kiln::ops
