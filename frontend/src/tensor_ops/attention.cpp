// nn::functional::scaled_dot_product_attention and the vjp of its op.
//
// float32/float64 CPU calls without dropout run the fused op (kiln/ops/attention.h): one
// kernel that never stores the [..., L, S] scores. Dropout on the weights, other dtypes and
// other devices take the "math" path, composed from matmul, softmax and masked_fill (as
// PyTorch's math backend). Both give a query whose keys are all masked zeros.
//
// The op's vjp is flash attention's backward written with kiln ops: it rebuilds the weights
// P = exp(scores - logsumexp) from the inputs (so the forward saved no [L, S] tensor), then
//   dV = Pᵀ dO,  dS = P * (dO Vᵀ - rowsum(dO * O)),  dQ = dS K * scale,  dK = dSᵀ Q * scale,
// and an additive mask receives dS summed to its shape. Written with ops, it is itself
// differentiable (double backward).
#include "kiln/ops/attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"
#include "nn_util.h"

namespace kiln {

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] ";
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

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

// key j > query i: the entries a causal mask removes, [L, S], on `device`.
Tensor future_keys(int64_t L, int64_t S, Device device) {
  const TensorOptions on = TensorOptions(kInt64).with_device(device);
  return arange(0, S, 1, on).unsqueeze(0) > arange(0, L, 1, on).unsqueeze(1);
}

// The batch dims of t (all but the last two).
IntList batch_dims(const Tensor& t) {
  return t.sizes().subspan(0, static_cast<size_t>(std::max<int64_t>(t.dim() - 2, 0)));
}

// t with its batch dims expanded to `batch` (a view; autograd sums the gradient back).
Tensor with_batch(const Tensor& t, IntList batch) {
  if (batch_dims(t) == batch) return t;
  Shape to(batch);
  to.push_back(t.size(-2));
  to.push_back(t.size(-1));
  return expand(t, to);
}

// softmax(q kᵀ * s + mask) v composed from ops, for dropout and the dtypes and devices the
// fused kernel does not serve.
Tensor attention_math(const Tensor& query, const Tensor& key, const Tensor& value,
                      const Tensor& attn_mask, double dropout_p, bool is_causal, double s) {
  Tensor scores = matmul(query * s, key.transpose(-2, -1));  // [..., L, S]
  if (attn_mask.defined()) {
    if (attn_mask.dtype() == kBool) {
      scores = masked_fill(scores, logical_not(attn_mask), kNegInf);
    } else {
      scores = scores + attn_mask.to(scores.dtype());
    }
  }
  if (is_causal)
    scores = masked_fill(scores, future_keys(scores.size(-2), scores.size(-1), scores.device()), kNegInf);
  Tensor weights;
  if (attn_mask.defined()) {
    // PyTorch's safe softmax: a row with every key masked gives zeros, not NaN. The row is
    // zeroed before the softmax too, so that its backward stays finite.
    Tensor dead = all(scores == kNegInf, {-1}, /*keepdim=*/true);
    weights = masked_fill(nn::functional::softmax(masked_fill(scores, dead, 0.0), -1), dead, 0.0);
  } else {
    weights = nn::functional::softmax(scores, -1);
  }
  if (dropout_p > 0) weights = nn::functional::dropout(weights, dropout_p, /*training=*/true);
  return matmul(weights, value);
}

bool fused_kernel_serves(const Tensor& query, double dropout_p) {
  return dropout_p == 0 && (query.dtype() == kFloat32 || query.dtype() == kFloat64) &&
         query.device().is_cpu();
}

}  // namespace

namespace nn::functional {

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
  KILN_CHECK(dropout_p >= 0 && dropout_p <= 1, kOp, "expected dropout_p in [0, 1], got ", dropout_p,
             ". Fix: pass e.g. 0.0 (inference) or 0.1.");
  // The batch dims of the scores: those of query, key and value broadcast together.
  Shape batch =
      broadcast_shapes(batch_dims(query), batch_dims(key), "scaled_dot_product_attention");
  batch = broadcast_shapes(batch, batch_dims(value), "scaled_dot_product_attention");
  if (attn_mask.defined()) {
    KILN_CHECK(attn_mask.dtype() == kBool || attn_mask.is_floating_point(), kOp,
               "expected a bool or floating attn_mask, got ", attn_mask.type_str(),
               ". Fix: pass a bool mask (true = may attend) or an additive float mask.");
    if (attn_mask.dim() > 2)
      batch = broadcast_shapes(batch, batch_dims(attn_mask), "scaled_dot_product_attention");
    Shape scores(batch);
    scores.push_back(query.size(-2));
    scores.push_back(key.size(-2));
    KILN_CHECK(broadcasts_to(attn_mask.sizes(), scores), kOp, "expected an attn_mask ",
               "that broadcasts to the scores [..., L, S] = ", shape_str(scores), ", got ",
               attn_mask.type_str(), ". Fix: shape it [L, S] or [batch..., L, S].");
  }
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(query.size(-1))));
  if (!fused_kernel_serves(query, dropout_p))
    return attention_math(query, key, value, attn_mask, dropout_p, is_causal, s);
  Tensor mask = attn_mask;
  if (mask.defined() && mask.dtype() != kBool && mask.dtype() != query.dtype())
    mask = mask.to(query.dtype());
  ops::AttentionAttrs a;
  a.scale = s;
  a.is_causal = is_causal;
  Tensors out = kiln::detail::call(
      ops::scaled_dot_product_attention,
      Tensors{with_batch(query, batch), with_batch(key, batch), with_batch(value, batch), mask}, a);
  return out[0];
}

}  // namespace nn::functional

namespace {

Tensors vjp_attention(const VjpCall& c) {
  const auto& a = static_cast<const ops::AttentionAttrs&>(c.attrs);
  const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2], &mask = c.inputs[3];
  const Tensor &o = c.outputs[0], &lse = c.outputs[1];
  const Tensor &go = c.grad_outputs[0], &glse = c.grad_outputs[1];
  const Tensor qs = q * a.scale;
  Tensor scores = matmul(qs, k.transpose(-2, -1));
  if (mask.defined())
    scores =
        mask.dtype() == kBool ? masked_fill(scores, logical_not(mask), kNegInf) : scores + mask;
  if (a.is_causal) scores = masked_fill(scores, future_keys(q.size(-2), k.size(-2), q.device()), kNegInf);
  // A query with no key to attend has logsumexp -inf and weights 0: shift it by 0 instead.
  const Tensor shift = masked_fill(lse, lse == kNegInf, 0.0).unsqueeze(-1);
  const Tensor p = exp(scores - shift);
  Tensor ds, gq, gk, gv, gm;
  if (go.defined()) {
    if (c.needs(2)) gv = matmul(p.transpose(-2, -1), go);
    ds = p * (matmul(go, v.transpose(-2, -1)) - sum(go * o, {-1}, true));
  }
  if (glse.defined()) {
    Tensor via_lse = p * glse.unsqueeze(-1);
    ds = ds.defined() ? ds + via_lse : via_lse;
  }
  if (ds.defined()) {
    if (c.needs(0)) gq = matmul(ds, k) * a.scale;
    if (c.needs(1)) gk = matmul(ds.transpose(-2, -1), qs);
    if (c.needs(3) && mask.defined() && mask.dtype() != kBool)
      gm = sum_to(ds, c.input_types[3].shape);
  }
  return Tensors{gq, gk, gv, gm};
}

}  // namespace

namespace detail {
void register_attention_vjps() {
  // The vjp rebuilds the weights from the inputs and logsumexp, and reads the output.
  set_vjp(ops::scaled_dot_product_attention, vjp_attention, {.inputs = 0b1111, .outputs = 0b11});
}
}  // namespace detail

}  // namespace kiln
