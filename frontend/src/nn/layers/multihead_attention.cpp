// nn::MultiheadAttention, following torch.nn.functional.multi_head_attention_forward step by
// step (packed projection, per-head scores, masks folded into one additive mask) so that its
// numerics match PyTorch's to float rounding.
#include "kiln/nn/layers/multihead_attention.h"

#include <cmath>
#include <limits>
#include <memory>

#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln::nn {

namespace {

constexpr const char* kWhere = "[MultiheadAttention] ";
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The largest head count <= num_heads that divides embed_dim (for the fix of an error).
int64_t dividing_heads(int64_t embed_dim, int64_t num_heads) {
  for (int64_t h = num_heads; h > 1; --h)
    if (embed_dim % h == 0) return h;
  return 1;
}

std::string shape_str(IntList shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check_mask_dtype(const Tensor& mask, const char* name) {
  KILN_CHECK(mask.dtype() == kBool || mask.is_floating_point(), kWhere, "expected a bool or ",
             "floating ", name, ", got ", mask.type_str(), ". Fix: pass a bool mask (true = ",
             "masked) or an additive float mask (-inf = masked), e.g. mask.to(kiln::kBool).");
}

// A mask as scores to add: bool true -> -inf, false -> 0; floating masks are cast.
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() == kBool) return masked_fill(zeros(mask.sizes(), TensorOptions(dtype).with_device(mask.device())), mask, kNegInf);
  return mask.to(dtype);
}

Tensor add_mask(const Tensor& total, const Tensor& more) {
  return total.defined() ? total + more : more;
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                       MultiheadAttentionOptions options)
    : embed_dim(embed_dim), num_heads(num_heads), options(options) {
  KILN_CHECK(embed_dim > 0 && num_heads > 0, kWhere,
             "expected positive embed_dim and num_heads, got MultiheadAttention(", embed_dim, ", ",
             num_heads, "). Fix: pass the model width and the number of heads, e.g. ",
             "MultiheadAttention(512, 8).");
  KILN_CHECK(embed_dim % num_heads == 0, kWhere, "expected embed_dim divisible by num_heads ",
             "(each head gets embed_dim / num_heads features), got embed_dim = ", embed_dim,
             " and num_heads = ", num_heads, ". Fix: use a head count that divides ", embed_dim,
             " (e.g. ", dividing_heads(embed_dim, num_heads), "), or change embed_dim.");
  KILN_CHECK(options.dropout >= 0 && options.dropout <= 1, kWhere,
             "the dropout probability must lie in [0, 1], got ", options.dropout,
             ". Fix: pass e.g. 0.0 or 0.1.");
  head_dim = embed_dim / num_heads;
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * embed_dim, embed_dim}));
  in_proj_bias =
      register_parameter("in_proj_bias", options.bias ? Tensor::empty({3 * embed_dim}) : Tensor());
  out_proj =
      register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, options.bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                      const Tensor& value,
                                                      const MhaCallOptions& call) {
  KILN_CHECK(query.defined() && key.defined() && value.defined(), kWhere,
             "expected query, key and value tensors, got an undefined one. Fix: pass all three ",
             "(x, x, x for self-attention).");
  KILN_CHECK(query.dim() == 2 || query.dim() == 3, kWhere, "expected a ",
             options.batch_first ? "[N, L, E]" : "[L, N, E]",
             " (batched) or [L, E] (unbatched) query, got ", query.type_str(),
             ". Fix: reshape the query to 3 dims (or 2 without a batch).");
  const bool batched = query.dim() == 3;
  KILN_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), kWhere, "expected ",
             batched ? "batched (3-D)" : "unbatched (2-D)",
             " key and value like the query, got query ", query.type_str(), ", key ",
             key.type_str(), ", value ", value.type_str(),
             ". Fix: give the three inputs the same layout.");
  KILN_CHECK(query.size(-1) == embed_dim, kWhere, "expected a query whose last dim is ",
             "embed_dim = ", embed_dim, ", got ", query.type_str(), ". Fix: pass [..., ", embed_dim,
             "] inputs, or build MultiheadAttention(", query.size(-1), ", num_heads).");
  KILN_CHECK(key.size(-1) == embed_dim && value.size(-1) == embed_dim, kWhere,
             "expected key and value whose last dim is embed_dim = ", embed_dim, ", got key ",
             key.type_str(), " and value ", value.type_str(),
             " (kdim/vdim other than embed_dim are not supported). Fix: project key and value ",
             "to ", embed_dim, " features first.");
  KILN_CHECK(key.sizes() == value.sizes(), kWhere, "expected key and value of one shape, got ",
             "key ", key.type_str(), " and value ", value.type_str(),
             ". Fix: pass one value per key.");

  // Work batch-first, [N, L, E]. Self-attention (one tensor passed three times) projects once.
  const bool self_attention = query.is_same(key) && key.is_same(value);
  auto batch_first_view = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(0);
    return options.batch_first ? t : t.transpose(0, 1);
  };
  Tensor q_in = batch_first_view(query), k_in = batch_first_view(key);
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1);
  KILN_CHECK(k_in.size(0) == N, kWhere, "expected query and key with the same batch size, ",
             "got query ", query.type_str(), " and key ", key.type_str(), " (batch dim ",
             options.batch_first ? 0 : 1,
             " with batch_first = ", options.batch_first ? "true" : "false",
             "). Fix: pass batches of equal size, or set batch_first to match the layout.");

  Tensor q, k, v;
  if (self_attention) {
    auto qkv = chunk(linear(q_in, in_proj_weight, in_proj_bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto w = chunk(in_proj_weight, 3, 0);
    std::vector<Tensor> b(3);
    if (in_proj_bias.defined()) b = chunk(in_proj_bias, 3, 0);
    q = linear(q_in, w[0], b[0]);
    k = linear(k_in, w[1], b[1]);
    v = linear(batch_first_view(value), w[2], b[2]);
  }
  auto split_heads = [&](const Tensor& t, int64_t len) {  // [N, len, E] -> [N, H, len, D]
    return t.reshape({N, len, num_heads, head_dim}).permute({0, 2, 1, 3});
  };
  q = split_heads(q, L), k = split_heads(k, S), v = split_heads(v, S);

  // Fold every mask into one additive mask that broadcasts to the scores [N, H, L, S].
  Tensor mask;
  if (call.attn_mask.defined()) {
    const Tensor& m = call.attn_mask;
    check_mask_dtype(m, "attn_mask");
    if (m.dim() == 2) {
      KILN_CHECK(m.size(0) == L && m.size(1) == S, kWhere,
                 "expected a 2-D attn_mask [L, S] = ", shape_str({L, S}), ", got ", m.type_str(),
                 ". Fix: one row per query position and one column per key position.");
      mask = additive(m, q.dtype()).view({1, 1, L, S});
    } else if (m.dim() == 3) {
      KILN_CHECK(m.size(0) == N * num_heads && m.size(1) == L && m.size(2) == S, kWhere,
                 "expected a 3-D attn_mask [", batched ? "N * num_heads" : "num_heads",
                 ", L, S] = ", shape_str({N * num_heads, L, S}), ", got ", m.type_str(),
                 ". Fix: one [L, S] mask per batch element and head (batch-major), or a 2-D [L, "
                 "S] mask shared by all.");
      mask = additive(m, q.dtype()).reshape({N, num_heads, L, S});
    } else {
      KILN_FAIL(kWhere, "expected a 2-D [L, S] or 3-D [N * num_heads, L, S] attn_mask, got ",
                m.type_str(), ". Fix: reshape the mask.");
    }
  }
  if (call.key_padding_mask.defined()) {
    const Tensor& m = call.key_padding_mask;
    check_mask_dtype(m, "key_padding_mask");
    bool ok = batched ? (m.dim() == 2 && m.size(0) == N && m.size(1) == S)
                      : (m.dim() == 1 && m.size(0) == S);
    KILN_CHECK(ok, kWhere, "expected a key_padding_mask ",
               batched ? "[N, S] = " + shape_str({N, S}) : "[S] = " + shape_str({S}),
               " (one flag per key), got ", m.type_str(),
               ". Fix: true marks padding keys; shape it [batch, key length].");
    mask = add_mask(mask, additive(m, q.dtype()).reshape({N, 1, 1, S}));
  }
  if (call.is_causal) {
    const TensorOptions on_q = TensorOptions(kInt64).with_device(q.device());
    Tensor future = arange(0, S, 1, on_q).unsqueeze(0) > arange(0, L, 1, on_q).unsqueeze(1);  // key j > query i
    mask = add_mask(mask, additive(future, q.dtype()).view({1, 1, L, S}));
  }

  const double p = is_training() ? options.dropout : 0.0;
  Tensor out, weights;
  if (call.need_weights) {
    // An explicit softmax, as PyTorch's weights path: a fully masked row is NaN there too.
    Tensor scores =
        matmul(q * (1.0 / std::sqrt(static_cast<double>(head_dim))), k.transpose(-2, -1));
    if (mask.defined()) scores = scores + mask;
    weights = functional::softmax(scores, -1);
    if (p > 0) weights = functional::dropout(weights, p, /*training=*/true);
    out = matmul(weights, v);
  } else {
    out = functional::scaled_dot_product_attention(q, k, v, mask, p);
  }
  out = out_proj(out.permute({0, 2, 1, 3}).reshape({N, L, embed_dim}));
  if (!batched) {
    out = out.squeeze(0);
  } else if (!options.batch_first) {
    out = out.transpose(0, 1);
  }
  if (weights.defined()) {
    if (call.average_attn_weights) weights = weights.mean({1});
    if (!batched) weights = weights.squeeze(0);
  }
  return {out, weights};
}

}  // namespace kiln::nn
