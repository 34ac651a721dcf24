// embedding and one_hot, and the vjps of embedding and embedding_backward.
#include "kiln/ops/embedding.h"

#include <algorithm>

#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/one_hot.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/view.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  KILN_CHECK(input.defined() && weight.defined(), "[embedding] input and weight must be defined.");
  KILN_CHECK(weight.dim() == 2,
             "[embedding] expected a 2-D weight [num_embeddings, embedding_dim], got ",
             weight.type_str(), ".");
  ops::EmbeddingAttrs a;
  if (padding_idx) {
    const int64_t rows = weight.size(0);
    KILN_CHECK(*padding_idx >= -rows && *padding_idx < rows,
               "[embedding] padding_idx=", *padding_idx, " is out of range for a table of ", rows,
               " rows. Fix: use an index in [-", rows, ", ", rows, ").");
    a.padding_idx = *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
  }
  return kiln::detail::call1(ops::embedding, {weight, input}, a);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  KILN_CHECK(indices.defined(), "[one_hot] the indices are undefined.");
  KILN_CHECK(indices.dtype() == kInt64, "[one_hot] expected int64 class indices, got ",
             indices.type_str(), ". Fix: convert with .to(kiln::kInt64).");
  KILN_CHECK(num_classes >= -1, "[one_hot] expected num_classes >= 0 (or -1 to infer it), got ",
             num_classes, ".");
  if (num_classes == -1) {
    // Reads the data: the class count decides the output shape.
    std::vector<int64_t> v = indices.to_vector<int64_t>();
    KILN_CHECK(!v.empty(),
               "[one_hot] cannot infer num_classes from an empty tensor. Fix: pass num_classes.");
    num_classes = *std::max_element(v.begin(), v.end()) + 1;
  }
  ops::OneHotAttrs a;
  a.num_classes = num_classes;
  return kiln::detail::call1(ops::one_hot, {indices}, a);
}

}  // namespace nn::functional

namespace {

Tensors vjp_embedding(const VjpCall& c) {
  ops::EmbeddingBackwardAttrs b;
  b.num_weights = c.input_types[0].shape[0];
  b.padding_idx = static_cast<const ops::EmbeddingAttrs&>(c.attrs).padding_idx;
  return Tensors{detail::call1(ops::embedding_backward, {c.grad_outputs[0], c.inputs[1]}, b),
                 Tensor()};
}

// embedding_backward is linear in grad; its adjoint reads the rows back (zero for padding).
Tensors vjp_embedding_backward(const VjpCall& c) {
  const auto& b = static_cast<const ops::EmbeddingBackwardAttrs&>(c.attrs);
  const Tensor &gg = c.grad_outputs[0], &indices = c.inputs[1];
  Tensor rows = detail::call1(ops::embedding, {gg, indices}, ops::EmbeddingAttrs());
  if (b.padding_idx) rows = rows * (indices != *b.padding_idx).to(rows.dtype()).unsqueeze(-1);
  return Tensors{rows, Tensor()};
}

}  // namespace

namespace detail {
void register_embedding_vjps() {
  // The embedding vjps need only the indices.
  set_vjp(ops::embedding, vjp_embedding, {.inputs = 0b10});
  set_vjp(ops::embedding_backward, vjp_embedding_backward, {.inputs = 0b10});
}
}  // namespace detail

}  // namespace kiln
