// Definition of scaled_dot_product_attention.
#include "kiln/ops/attention.h"

#include <cmath>

#include "kiln/ops/infer_util.h"
#include "nn_infer.h"

namespace kiln::ops {

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] ";

void infer_attention(InferCall& c) {
  KILN_CHECK(c.inputs.size() == 4, kOp, "expected 4 inputs (query, key, value, mask), got ",
             c.inputs.size(), ".");
  for (size_t i = 0; i < 3; ++i)
    KILN_CHECK(infer::has_input(c, i), kOp, "the ", c.op.input_names[i], " is undefined.");
  const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
  infer::check_floating(c, 0);
  KILN_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), kOp,
             "expected query, key and value of one dtype, got ", q.type_str(), ", ", k.type_str(),
             " and ", v.type_str(), ". Fix: convert them with .to(", q.dtype(), ").");
  KILN_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kOp,
             "expected query [..., L, D], key [..., S, D] and value [..., S, Dv] of one rank >= 2, "
             "got ",
             q.type_str(), ", ", k.type_str(), " and ", v.type_str(),
             ". Fix: give the three the same batch dims.");
  const int64_t r = q.dim();
  for (int64_t d = 0; d + 2 < r; ++d)
    KILN_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), kOp,
               "expected query, key and value with the same batch dims, got ", q.type_str(), ", ",
               k.type_str(), " and ", v.type_str(), ". Fix: expand them to one batch shape first.");
  KILN_CHECK(k.size(-1) == q.size(-1), kOp,
             "expected query and key with the same depth (last dim), got ", q.type_str(), " and ",
             k.type_str(), ".");
  KILN_CHECK(v.size(-2) == k.size(-2), kOp,
             "expected key and value with the same length (dim -2), got ", k.type_str(), " and ",
             v.type_str(), ".");
  const auto& a = static_cast<const AttentionAttrs&>(c.attrs);
  KILN_CHECK(std::isfinite(a.scale), kOp, "expected a finite scale, got ", a.scale, ".");
  Shape scores(q.sizes());
  scores.back() = k.size(-2);
  if (infer::has_input(c, 3)) {
    const Tensor& m = c.inputs[3];
    KILN_CHECK(m.dtype() == kBool || m.dtype() == q.dtype(), kOp,
               "expected a bool mask (true = may attend) or an additive mask of the query's dtype ",
               q.dtype(), ", got ", m.type_str(), ".");
    bool fits = m.dim() <= r;
    for (int64_t i = 1; fits && i <= m.dim(); ++i)
      fits = m.size(-i) == 1 || m.size(-i) == scores[r - i];
    KILN_CHECK(fits, kOp,
               "expected a mask that broadcasts to the scores [..., L, S] = ", shape_str(scores),
               ", got ", m.type_str(), ".");
    KILN_CHECK(!a.is_causal, kOp,
               "got both a mask and is_causal. Fix: fold the causal mask into the mask.");
  }
  Shape out(q.sizes());
  out.back() = v.size(-1);
  Shape lse(q.sizes());
  lse.pop_back();
  c.outputs.push_back({q.dtype(), out, q.device()});
  c.outputs.push_back({q.dtype(), lse, q.device()});
}

}  // namespace

OpDef scaled_dot_product_attention(
    "scaled_dot_product_attention", {"query", "key", "value", "mask"}, infer_attention,
    LoweringClass::Composite, attrs_of<AttentionAttrs>(),
    {.optional_outputs = 0b10 /* logsumexp: only the vjp reads it */});

}  // namespace kiln::ops
