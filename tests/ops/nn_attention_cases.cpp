// OpCases for scaled_dot_product_attention (the fused op behind
// nn::functional::scaled_dot_product_attention): head sizes that fill no whole vector,
// sequences longer than one query block (64) and one key block (128), bool and additive
// masks that broadcast, causality with L != S, fully masked queries, no keys at all, and
// gradients that reach the logsumexp output.
#include <cmath>
#include <limits>

#include "harness.h"
#include "kiln/ops/attention.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

enum class MaskKind { None, Bool, Additive };

// softmax(q kᵀ * scale + mask) v over q [B..., L, D], k [B..., S, D], v [B..., S, Dv]; a
// mask broadcasts to [B..., L, S] (bool: nonzero = may attend). A query without any key to
// attend gets zeros.
Ref attention_ref(const Ref& q, const Ref& k, const Ref& v, const Ref* mask, MaskKind kind,
                  bool causal, double scale) {
  const size_t r = q.shape.size();
  const int64_t L = q.shape[r - 2], D = q.shape[r - 1], S = k.shape[r - 2], Dv = v.shape[r - 1];
  const int64_t batch = L * D == 0 ? 0 : q.numel() / (L * D);
  Ref out;
  out.shape = q.shape;
  out.shape.back() = Dv;
  out.v.assign(static_cast<size_t>(numel(out.shape)), 0.0);
  Shape scores(q.shape);
  scores.back() = S;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(static_cast<size_t>(S));
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += q.v[(b * L + i) * D + d] * scale * k.v[(b * S + j) * D + d];
        if (mask) {
          // The mask's element for scores index (b..., i, j), right-aligned and broadcast.
          Shape at(scores.size());
          int64_t rest = b;
          for (size_t d = r - 2; d-- > 0;) {
            at[d] = rest % scores[d];
            rest /= scores[d];
          }
          at[r - 2] = i, at[r - 1] = j;
          Shape mi;
          for (size_t d = r - mask->shape.size(); d < r; ++d)
            mi.push_back(mask->shape[d - (r - mask->shape.size())] == 1 ? 0 : at[d]);
          const double mv = ref_at(*mask, mi);
          if (kind == MaskKind::Bool) {
            if (mv == 0) dot = -std::numeric_limits<double>::infinity();
          } else {
            dot += mv;
          }
        }
        if (causal && j > i) dot = -std::numeric_limits<double>::infinity();
        s[j] = dot;
        m = std::max(m, dot);
      }
      if (m == -std::numeric_limits<double>::infinity()) continue;  // zeros
      double sum = 0;
      for (double& x : s) sum += x = std::exp(x - m);
      for (int64_t j = 0; j < S; ++j)
        for (int64_t e = 0; e < Dv; ++e)
          out.v[(b * L + i) * Dv + e] += s[j] / sum * v.v[(b * S + j) * Dv + e];
    }
  return out;
}

Input bool_mask(Shape s) {
  return Input{s, Gen::Bool, kBool, 0, false};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  {
    OpCase c;
    c.op = "scaled_dot_product_attention";
    c.label = "plain";
    c.runs = {{{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 6}}},
              {{{1, 1, 1}}, {{1, 1, 1}}, {{1, 1, 1}}},
              {{{2, 2, 7, 5}}, {{2, 2, 9, 5}}, {{2, 2, 9, 3}}},
              {{{3, 16}}, {{17, 16}}, {{17, 20}}},
              // several query blocks (70 > 64) and key blocks (300 > 2 x 128)
              {{{1, 70, 8}}, {{1, 300, 8}}, {{1, 300, 3}}},
              {{{2, 3, 4}}, {{2, 0, 4}}, {{2, 0, 6}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::scaled_dot_product_attention(in[0], in[1], in[2]);
    };
    c.ref = [](const std::vector<Ref>& r) {
      return attention_ref(r[0], r[1], r[2], nullptr, MaskKind::None, false,
                           1 / std::sqrt(static_cast<double>(r[0].shape.back())));
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    // Random bool masks: some queries may attend to no key (zeros, zero gradients).
    OpCase c;
    c.op = "scaled_dot_product_attention";
    c.label = "bool_mask";
    c.runs = {{{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 6}}, bool_mask({3, 5})},
              {{{2, 2, 6, 4}}, {{2, 2, 6, 4}}, {{2, 2, 6, 4}}, bool_mask({2, 1, 1, 6})},
              {{{1, 40, 8}}, {{1, 150, 8}}, {{1, 150, 8}}, bool_mask({1, 40, 150})}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, false, 0.7);
    };
    c.ref = [](const std::vector<Ref>& r) {
      return attention_ref(r[0], r[1], r[2], &r[3], MaskKind::Bool, false, 0.7);
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    // An additive mask, differentiable too, broadcast over the batch or the queries.
    OpCase c;
    c.op = "scaled_dot_product_attention";
    c.label = "additive_mask";
    c.runs = {{{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 6}}, {{3, 5}}},
              {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 6}}, {{2, 1, 5}}},
              {{{2, 2, 6, 4}}, {{2, 2, 6, 4}}, {{2, 2, 6, 4}}, {{2, 2, 6, 6}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
    };
    c.ref = [](const std::vector<Ref>& r) {
      return attention_ref(r[0], r[1], r[2], &r[3], MaskKind::Additive, false,
                           1 / std::sqrt(static_cast<double>(r[0].shape.back())));
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    OpCase c;
    c.op = "scaled_dot_product_attention";
    c.label = "causal";
    c.runs = {{{{2, 5, 4}}, {{2, 5, 4}}, {{2, 5, 3}}},
              {{{1, 7, 4}}, {{1, 4, 4}}, {{1, 4, 4}}},  // L > S: late queries see every key
              {{{1, 3, 4}}, {{1, 9, 4}}, {{1, 9, 4}}},  // L < S
              {{{1, 130, 8}}, {{1, 200, 8}}, {{1, 200, 8}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.0, true);
    };
    c.ref = [](const std::vector<Ref>& r) {
      return attention_ref(r[0], r[1], r[2], nullptr, MaskKind::None, true,
                           1 / std::sqrt(static_cast<double>(r[0].shape.back())));
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    // The op called directly: gradients reach logsumexp as well as the output.
    OpCase c;
    c.op = "scaled_dot_product_attention";
    c.label = "logsumexp_output";
    c.runs = {{{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 2}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      init();
      ops::AttentionAttrs a;
      a.scale = 0.5;
      Tensors o =
          dispatch(ops::scaled_dot_product_attention, Tensors{in[0], in[1], in[2], Tensor()}, a);
      return o[0] + (o[1] * 0.3).unsqueeze(-1);
    };
    c.ref = [](const std::vector<Ref>& r) {
      Ref o = attention_ref(r[0], r[1], r[2], nullptr, MaskKind::None, false, 0.5);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 3; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < 5; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < 4; ++d)
              dot += r[0].v[(b * 3 + i) * 4 + d] * 0.5 * r[1].v[(b * 5 + j) * 4 + d];
            sum += std::exp(dot);
          }
          for (int64_t e = 0; e < 2; ++e) o.v[(b * 3 + i) * 2 + e] += 0.3 * std::log(sum);
        }
      return o;
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  return out;
}

Register attention_cases(cases());

}  // namespace
}  // namespace kiln::testing
