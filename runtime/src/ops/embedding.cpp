// Definitions of embedding and embedding_backward.
#include "kiln/ops/embedding.h"

#include "kiln/ops/infer_util.h"
#include "nn_infer.h"

namespace kiln::ops {

namespace {

void check_padding_idx(const InferCall& c, const std::optional<int64_t>& padding_idx,
                       int64_t num_weights) {
  KILN_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < num_weights), "[", c.op.name,
             "] padding_idx=", padding_idx.value_or(0), " is out of range for a table of ",
             num_weights, " rows. Fix: use an index in [-", num_weights, ", ", num_weights, ").");
}

void infer_embedding(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_compute_dtype(c, 0);
  const Tensor& w = c.inputs[0];
  KILN_CHECK(w.dim() == 2,
             "[embedding] expected a 2-D weight [num_embeddings, embedding_dim], got ",
             w.type_str(), ".");
  infer::check_index_tensor(c, 1);
  check_padding_idx(c, static_cast<const EmbeddingAttrs&>(c.attrs).padding_idx, w.size(0));
  Shape out(c.inputs[1].sizes());
  out.push_back(w.size(1));
  c.outputs.push_back({w.dtype(), out, w.device()});
}

void infer_embedding_backward(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_floating(c, 0);
  infer::check_index_tensor(c, 1);
  const auto& a = static_cast<const EmbeddingBackwardAttrs&>(c.attrs);
  const Tensor &g = c.inputs[0], &idx = c.inputs[1];
  KILN_CHECK(a.num_weights >= 0, "[embedding_backward] expected num_weights >= 0, got ",
             a.num_weights, ".");
  check_padding_idx(c, a.padding_idx, a.num_weights);
  bool fits = g.dim() == idx.dim() + 1;
  for (int64_t d = 0; fits && d < idx.dim(); ++d) fits = g.size(d) == idx.size(d);
  KILN_CHECK(fits, "[embedding_backward] expected grad of shape [*indices.shape, D] for indices ",
             idx.type_str(), ", got ", g.type_str(), ".");
  c.outputs.push_back({g.dtype(), Shape{a.num_weights, g.size(-1)}, g.device()});
}

}  // namespace

OpDef embedding("embedding", {"weight", "indices"}, infer_embedding, LoweringClass::Layout,
                attrs_of<EmbeddingAttrs>(), {.nondiff_inputs = 0b10});
OpDef embedding_backward("embedding_backward", {"grad", "indices"}, infer_embedding_backward,
                         LoweringClass::Layout, attrs_of<EmbeddingBackwardAttrs>(),
                         {.nondiff_inputs = 0b10});

}  // namespace kiln::ops
