// nn::functional::scaled_dot_product_attention, composed from matmul, softmax and masked_fill:
// autograd and tracing then need no rule of their own, at the cost of materializing the
// [..., L, S] score matrix (PyTorch's "math" path).
#include <cmath>
#include <limits>
#include <string>

#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln::nn::functional {

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] ";

// NumPy broadcasting from `from` to `to` (only `from` may have size-1 or missing dims).
bool broadcasts_to(IntList from, IntList to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 1; i <= from.size(); ++i) {
    int64_t f = from[from.size() - i];
    if (f != 1 && f != to[to.size() - i]) return false;
  }
  return true;
}

void check_operand(const Tensor& t, const char* name) {
  KILN_CHECK(t.defined(), kOp, "expected a tensor for ", name,
             ", got an undefined one. Fix: pass query, key and value.");
  KILN_CHECK(t.dim() >= 2 && t.is_floating_point(), kOp, "expected ", name,
             " to be a floating tensor with at least 2 dims ([..., seq, features]), got ",
             t.type_str(), ". Fix: reshape it to [batch..., seq, features] and use a float dtype.");
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  check_operand(query, "query");
  check_operand(key, "key");
  check_operand(value, "value");
  KILN_CHECK(query.dtype() == key.dtype() && key.dtype() == value.dtype(), kOp,
             "expected query, key and value of one dtype, got ", query.type_str(), ", ",
             key.type_str(), " and ", value.type_str(), ". Fix: convert them with .to(dtype).");
  KILN_CHECK(query.size(-1) == key.size(-1), kOp,
             "expected query and key with the same feature size (last dim), got query ",
             query.type_str(), " and key ", key.type_str(),
             ". Fix: project them to the same width.");
  KILN_CHECK(key.size(-2) == value.size(-2), kOp,
             "expected key and value with the same sequence length (dim -2), got key ",
             key.type_str(), " and value ", value.type_str(), ". Fix: pass one value per key.");
  KILN_CHECK(!(is_causal && attn_mask.defined()), kOp,
             "got both attn_mask and is_causal = true. Fix: pass one of them (fold the causal "
             "mask into attn_mask to combine them).");
  if (attn_mask.defined()) {
    KILN_CHECK(attn_mask.dtype() == kBool || attn_mask.is_floating_point(), kOp,
               "expected a bool or floating attn_mask, got ", attn_mask.type_str(),
               ". Fix: pass a bool mask (true = may attend) or an additive float mask.");
  }
  double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(query.size(-1))));
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();

  Tensor scores = matmul(query * s, key.transpose(-2, -1));  // [..., L, S]
  if (attn_mask.defined()) {
    KILN_CHECK(broadcasts_to(attn_mask.sizes(), scores.sizes()), kOp, "expected an attn_mask ",
               "that broadcasts to the scores [..., L, S] = ", scores.type_str(), ", got ",
               attn_mask.type_str(), ". Fix: shape it [L, S] or [batch..., L, S].");
    if (attn_mask.dtype() == kBool) {
      scores = masked_fill(scores, logical_not(attn_mask), kNegInf);
    } else {
      scores = scores + attn_mask.to(scores.dtype());
    }
  }
  if (is_causal) {
    int64_t L = scores.size(-2), S = scores.size(-1);
    Tensor future = arange(S).unsqueeze(0) > arange(L).unsqueeze(1);  // key j > query i
    scores = masked_fill(scores, future, kNegInf);
  }
  Tensor weights;
  if (attn_mask.defined()) {
    // PyTorch's safe softmax: a row with every key masked gives zeros, not NaN. The row is
    // zeroed before the softmax too, so that its backward stays finite.
    Tensor dead = all(scores == kNegInf, {-1}, /*keepdim=*/true);
    weights = masked_fill(softmax(masked_fill(scores, dead, 0.0), -1), dead, 0.0);
  } else {
    weights = softmax(scores, -1);
  }
  if (dropout_p > 0) weights = dropout(weights, dropout_p, /*training=*/true);
  return matmul(weights, value);
}

}  // namespace kiln::nn::functional
