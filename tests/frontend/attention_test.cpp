// Attention: scaled_dot_product_attention, MultiheadAttention, TransformerEncoderLayer and
// TransformerEncoder against naive loop references (float64), finite-difference gradients,
// masks, causal attention, both layouts, unbatched inputs, dropout and eval(), parameter names
// and initialization, printouts, call paths and every error.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers/layer_norm.h"
#include "kiln/nn/layers/multihead_attention.h"
#include "kiln/nn/layers/transformer.h"
#include "kiln/nn/module.h"
#include "kiln/nn/sequential.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/random.h"
#include "kiln/tensor_ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = kiln::nn::functional;
using Vec = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();

Vec vec(const Tensor& t) {
  return t.to_vector<double>();
}

Tensor bool_mask(std::vector<int> v, std::vector<int64_t> shape) {
  std::vector<bool> b(v.begin(), v.end());
  return Tensor::from_vector<bool>(b, shape);
}

void expect_near(const Tensor& got, const Vec& want, double tol, const std::string& where) {
  Vec g = vec(got);
  ASSERT_EQ(g.size(), want.size()) << where;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << where << " at " << i << ": " << g[i];
    } else {
      EXPECT_NEAR(g[i], want[i], tol) << where << " at " << i;
    }
  }
}

// ---- naive references (row-major doubles, loops) ----

// Additive mask of the scores: (batch, head, query i, key j) -> 0 or -inf or any value.
using MaskFn = std::function<double(int64_t, int64_t, int64_t, int64_t)>;

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[t, o] = b[o] + sum_e w[o, e] x[t, e] for `rows` rows of width `in`.
Vec ref_linear(const Vec& x, int64_t rows, int64_t in, const Vec& w, const Vec& b, int64_t out) {
  Vec y(static_cast<size_t>(rows * out));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t o = 0; o < out; ++o)
      y[t * out + o] = (b.empty() ? 0.0 : b[o]) + dot(&w[o * in], &x[t * in], in);
  return y;
}

struct RefAttention {
  Vec out;      // [N, L, E]
  Vec weights;  // [N, H, L, S]
};

// Multi-head attention on batch-first [N, L, E] query and [N, S, E] key/value.
RefAttention ref_mha(const Vec& xq, const Vec& xk, const Vec& xv, int64_t N, int64_t L, int64_t S,
                     int64_t E, int64_t H, const nn::MultiheadAttention& m,
                     const MaskFn& mask = nullptr) {
  Vec w_in = vec(m.in_proj_weight), b_in = m.in_proj_bias.defined() ? vec(m.in_proj_bias) : Vec();
  auto rows = [&](int64_t part, const Vec& w) {
    return Vec(w.begin() + part * E * E, w.begin() + (part + 1) * E * E);
  };
  auto bias = [&](int64_t part) {
    return b_in.empty() ? Vec() : Vec(b_in.begin() + part * E, b_in.begin() + (part + 1) * E);
  };
  Vec q = ref_linear(xq, N * L, E, rows(0, w_in), bias(0), E);
  Vec k = ref_linear(xk, N * S, E, rows(1, w_in), bias(1), E);
  Vec v = ref_linear(xv, N * S, E, rows(2, w_in), bias(2), E);
  const int64_t D = E / H;
  RefAttention r;
  r.weights.assign(static_cast<size_t>(N * H * L * S), 0);
  Vec heads(static_cast<size_t>(N * L * E), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        Vec s(static_cast<size_t>(S));
        double mx = -kInf;
        for (int64_t j = 0; j < S; ++j) {
          s[j] = dot(&q[(n * L + i) * E + h * D], &k[(n * S + j) * E + h * D], D) / std::sqrt(D);
          if (mask) s[j] += mask(n, h, i, j);
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < S; ++j) z += std::exp(s[j] - mx);  // NaN when all are -inf
        double* p = &r.weights[((n * H + h) * L + i) * S];
        for (int64_t j = 0; j < S; ++j) p[j] = std::exp(s[j] - mx) / z;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += p[j] * v[(n * S + j) * E + h * D + d];
          heads[(n * L + i) * E + h * D + d] = acc;
        }
      }
  r.out = ref_linear(heads, N * L, E, vec(m.out_proj->weight),
                     m.out_proj->bias.defined() ? vec(m.out_proj->bias) : Vec(), E);
  return r;
}

// weights [N, H, L, S] averaged over the heads -> [N, L, S].
Vec head_mean(const Vec& w, int64_t N, int64_t H, int64_t L, int64_t S) {
  Vec out(static_cast<size_t>(N * L * S), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < L * S; ++t) out[n * L * S + t] += w[(n * H + h) * L * S + t] / H;
  return out;
}

Vec ref_layer_norm(const Vec& x, int64_t rows, int64_t E, const nn::LayerNorm& ln) {
  Vec w = vec(ln.weight), b = vec(ln.bias), y(x.size());
  for (int64_t t = 0; t < rows; ++t) {
    double mean = 0, var = 0;
    for (int64_t e = 0; e < E; ++e) mean += x[t * E + e] / E;
    for (int64_t e = 0; e < E; ++e) var += (x[t * E + e] - mean) * (x[t * E + e] - mean) / E;
    for (int64_t e = 0; e < E; ++e)
      y[t * E + e] = (x[t * E + e] - mean) / std::sqrt(var + ln.options.eps) * w[e] + b[e];
  }
  return y;
}

Vec add(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// One encoder layer on batch-first [N, S, E] (dropout off).
Vec ref_encoder_layer(const Vec& x, int64_t N, int64_t S, const nn::TransformerEncoderLayer& layer,
                      const MaskFn& mask = nullptr) {
  const int64_t E = layer.d_model, FF = layer.options.dim_feedforward;
  auto sa = [&](const Vec& in) {
    return ref_mha(in, in, in, N, S, S, E, layer.nhead, *layer.self_attn, mask).out;
  };
  auto ff = [&](const Vec& in) {
    Vec h = ref_linear(in, N * S, E, vec(layer.linear1->weight), vec(layer.linear1->bias), FF);
    for (double& a : h)
      a = layer.options.activation == nn::TransformerActivation::GELU
              ? 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)))
              : std::max(a, 0.0);
    return ref_linear(h, N * S, FF, vec(layer.linear2->weight), vec(layer.linear2->bias), E);
  };
  auto ln1 = [&](const Vec& in) { return ref_layer_norm(in, N * S, E, *layer.norm1); };
  auto ln2 = [&](const Vec& in) { return ref_layer_norm(in, N * S, E, *layer.norm2); };
  Vec y = x;
  if (layer.options.norm_first) {
    y = add(y, sa(ln1(y)));
    y = add(y, ff(ln2(y)));
  } else {
    y = ln1(add(y, sa(y)));
    y = ln2(add(y, ff(y)));
  }
  return y;
}

// ---- finite differences ----

// Checks d/d(each tensor of wrt) of L = sum(f() * w) against central differences. The tensors
// are float64 leaves (inputs or parameters) whose data is nudged in place.
void gradcheck(const std::function<Tensor()>& f, const std::vector<Tensor>& wrt,
               const std::string& where) {
  Tensor out = f();
  manual_seed(99);
  Tensor w = randn(out.sizes(), kFloat64);
  std::vector<Tensor> analytic =
      grad({(out * w).sum()}, wrt, {}, GradOptions{.allow_unused = true});
  for (size_t k = 0; k < wrt.size(); ++k) {
    ASSERT_TRUE(wrt[k].is_contiguous()) << where;
    Vec got = analytic[k].defined() ? vec(analytic[k]) : Vec(wrt[k].numel(), 0.0);
    double* p = wrt[k].detach().data_ptr<double>();
    int reported = 0;
    for (int64_t e = 0; e < wrt[k].numel(); ++e) {
      NoGradGuard no_grad;
      const double h = 1e-6, x0 = p[e];
      p[e] = x0 + h;
      double up = (f() * w).sum().item<double>();
      p[e] = x0 - h;
      double down = (f() * w).sum().item<double>();
      p[e] = x0;
      double num = (up - down) / (2 * h);
      if (std::abs(got[e] - num) > 1e-6 * std::max(1.0, std::abs(num)) && reported++ < 5)
        ADD_FAILURE() << where << ": input " << k << " element " << e << " autograd " << got[e]
                      << ", finite differences " << num;
    }
  }
}

std::vector<Tensor> leaves(nn::Module& m, std::vector<Tensor> inputs) {
  for (Tensor& t : inputs) t.requires_grad_(true);
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

// ---- scaled_dot_product_attention ----

TEST(Attention, SdpaMatchesReferenceWithMasksAndScale) {
  manual_seed(1);
  const int64_t B = 2, L = 3, S = 4, E = 5, Ev = 2;
  Tensor q = randn({B, L, E}, kFloat64), k = randn({B, S, E}, kFloat64),
         v = randn({B, S, Ev}, kFloat64);
  // bool: true = may attend; row 1 attends to nothing.
  Tensor allow = bool_mask({1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0}, {L, S});
  Tensor bias = randn({B, 1, S}, kFloat64);
  Vec qv = vec(q), kv = vec(k), vv = vec(v), av = vec(allow.to(kFloat64)), bv = vec(bias);
  auto reference = [&](double scale, int mode) {  // 0 plain, 1 bool mask, 2 float, 3 causal
    Vec out(static_cast<size_t>(B * L * Ev), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < L; ++i) {
        Vec s(S);
        double mx = -kInf;
        for (int64_t j = 0; j < S; ++j) {
          s[j] = dot(&qv[(b * L + i) * E], &kv[(b * S + j) * E], E) * scale;
          if (mode == 1 && av[i * S + j] == 0) s[j] = -kInf;
          if (mode == 2) s[j] += bv[b * S + j];
          if (mode == 3 && j > i) s[j] = -kInf;
          mx = std::max(mx, s[j]);
        }
        if (mx == -kInf) continue;  // every key masked: zeros
        double z = 0;
        for (int64_t j = 0; j < S; ++j) z += std::exp(s[j] - mx);
        for (int64_t j = 0; j < S; ++j)
          for (int64_t d = 0; d < Ev; ++d)
            out[(b * L + i) * Ev + d] += std::exp(s[j] - mx) / z * vv[(b * S + j) * Ev + d];
      }
    return out;
  };
  const double tol = 1e-12, def = 1 / std::sqrt(5.0);
  expect_near(F::scaled_dot_product_attention(q, k, v), reference(def, 0), tol, "plain");
  expect_near(F::scaled_dot_product_attention(q, k, v, allow), reference(def, 1), tol, "bool");
  expect_near(F::scaled_dot_product_attention(q, k, v, bias), reference(def, 2), tol, "float");
  expect_near(F::scaled_dot_product_attention(q, k, v, {}, 0, true), reference(def, 3), tol,
              "causal");
  expect_near(F::scaled_dot_product_attention(q, k, v, {}, 0, false, 0.5), reference(0.5, 0), tol,
              "scale");
  // Batch dims broadcast ([2, 1, L, E] with [1, 3, S, E]).
  Tensor qb = randn({2, 1, L, E}, kFloat64), kb = randn({1, 3, S, E}, kFloat64);
  EXPECT_EQ(F::scaled_dot_product_attention(qb, kb, kb).shape(), (Shape{2, 3, L, E}));
  // dropout_p applies even outside a module (as PyTorch's functional): p = 1 drops everything.
  expect_near(F::scaled_dot_product_attention(q, k, v, {}, 1.0), Vec(B * L * Ev, 0.0), 0, "p=1");
}

TEST(Attention, SdpaGradientsIncludingAFullyMaskedRow) {
  manual_seed(2);
  Tensor q = randn({2, 3, 4}, kFloat64).requires_grad_(true);
  Tensor k = randn({2, 3, 4}, kFloat64).requires_grad_(true);
  Tensor v = randn({2, 3, 2}, kFloat64).requires_grad_(true);
  Tensor allow = bool_mask({1, 1, 0, 0, 0, 0, 1, 0, 1}, {3, 3});
  gradcheck([&] { return F::scaled_dot_product_attention(q, k, v, allow); }, {q, k, v}, "mask");
  gradcheck([&] { return F::scaled_dot_product_attention(q, k, v, {}, 0, true); }, {q, k, v},
            "causal");
  Tensor out = F::scaled_dot_product_attention(q, k, v, allow);
  out.sum().backward();
  for (const Tensor& t : {q, k, v})
    for (double g : vec(t.grad())) EXPECT_TRUE(std::isfinite(g));
}

TEST(Attention, SdpaErrors) {
  Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  expect_error([&] { F::scaled_dot_product_attention(Tensor(), k, v); },
               {"[scaled_dot_product_attention]", "query", "undefined"});
  expect_error([&] { F::scaled_dot_product_attention(randn({4}), k, v); },
               {"[scaled_dot_product_attention]", "at least 2 dims", "float32[4]"});
  expect_error([&] { F::scaled_dot_product_attention(q, k.to(kFloat64), v); },
               {"one dtype", "float64[2, 5, 4]", "Fix"});
  expect_error(
      [&] {
        F::scaled_dot_product_attention(q, randn({2, 5, 3}), v);
      },
      {"same feature size", "float32[2, 5, 3]"});
  expect_error(
      [&] {
        F::scaled_dot_product_attention(q, k, randn({2, 4, 6}));
      },
      {"same sequence length", "float32[2, 4, 6]"});
  expect_error(
      [&] {
        F::scaled_dot_product_attention(q, k, v, ones({3, 5}, kBool), 0, true);
      },
      {"both attn_mask and is_causal", "Fix"});
  expect_error(
      [&] {
        F::scaled_dot_product_attention(q, k, v, ones({3, 5}, kInt64));
      },
      {"bool or floating attn_mask", "int64[3, 5]"});
  expect_error(
      [&] {
        F::scaled_dot_product_attention(q, k, v, ones({3, 4}, kBool));
      },
      {"broadcasts to the scores", "[2, 3, 5]", "bool[3, 4]"});
}

// ---- MultiheadAttention ----

TEST(Attention, MhaParametersAndInitFollowPyTorch) {
  manual_seed(3);
  nn::MultiheadAttention attn(8, 2);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (auto& [name, p] : attn.named_parameters()) {
    names.push_back(name);
    shapes.push_back(p.shape());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                             "out_proj.bias"}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{24, 8}, {24}, {8, 8}, {8}}));
  EXPECT_EQ(attn.head_dim, 4);
  for (double b : vec(attn.in_proj_bias)) EXPECT_EQ(b, 0);
  for (double b : vec(attn.out_proj->bias)) EXPECT_EQ(b, 0);
  // xavier_uniform_: bound sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 32).
  double bound = std::sqrt(6.0 / 32), largest = 0;
  for (double w : vec(attn.in_proj_weight)) largest = std::max(largest, std::abs(w));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.8 * bound);
  // out_proj keeps Linear's bound 1/sqrt(8).
  for (double w : vec(attn.out_proj->weight)) EXPECT_LE(std::abs(w), 1 / std::sqrt(8.0));
  nn::MultiheadAttention no_bias(8, 2, {.bias = false});
  EXPECT_EQ(no_bias.parameters().size(), 2u);
  EXPECT_FALSE(no_bias.out_proj->bias.defined());
  EXPECT_EQ(attn.repr(),
            "MultiheadAttention(\n"
            "  (out_proj): Linear(in_features=8, out_features=8, bias=true)\n"
            ")");
}

struct MhaCase {
  nn::MultiheadAttention attn;
  int64_t N = 2, L = 3, S = 4, E = 6, H = 3;
  explicit MhaCase(nn::MultiheadAttentionOptions o = {}) : attn(6, 3, o) {
    attn.to(kFloat64);
    NoGradGuard g;  // non-zero biases so that the reference checks them
    attn.in_proj_bias.detach().copy_(randn({18}, kFloat64) * 0.5);
    attn.out_proj->bias.detach().copy_(randn({6}, kFloat64) * 0.5);
  }
};

TEST(Attention, MhaMatchesReferenceInBothLayouts) {
  manual_seed(4);
  for (bool batch_first : {false, true}) {
    MhaCase c({.batch_first = batch_first});
    Tensor q_bf = randn({c.N, c.L, c.E}, kFloat64), kv_bf = randn({c.N, c.S, c.E}, kFloat64),
           v_bf = randn({c.N, c.S, c.E}, kFloat64);
    auto layout = [&](const Tensor& t) { return batch_first ? t : t.transpose(0, 1); };
    auto [out, w] = nn::call(c.attn, layout(q_bf), layout(kv_bf), layout(v_bf));
    RefAttention r = ref_mha(vec(q_bf), vec(kv_bf), vec(v_bf), c.N, c.L, c.S, c.E, c.H, c.attn);
    std::string where = batch_first ? "batch_first" : "sequence first";
    EXPECT_EQ(out.shape(), batch_first ? (Shape{2, 3, 6}) : (Shape{3, 2, 6})) << where;
    expect_near(layout(out), r.out, 1e-12, where);
    expect_near(w, head_mean(r.weights, c.N, c.H, c.L, c.S), 1e-12, where + " weights");
    // Per-head weights, and self-attention (one tensor three times) in this layout.
    auto [out2, w2] = nn::call(c.attn, layout(q_bf), layout(kv_bf), layout(v_bf),
                               nn::MhaCallOptions{.average_attn_weights = false});
    EXPECT_EQ(w2.shape(), (Shape{2, 3, 3, 4}));
    expect_near(w2, r.weights, 1e-12, where + " per head");
    Tensor x = layout(q_bf);
    RefAttention rs = ref_mha(vec(q_bf), vec(q_bf), vec(q_bf), c.N, c.L, c.L, c.E, c.H, c.attn);
    expect_near(layout(nn::call(c.attn, x, x, x).first), rs.out, 1e-12, where + " self");
  }
}

TEST(Attention, MhaMasksAndCausal) {
  manual_seed(5);
  MhaCase c;
  Tensor q_bf = randn({c.N, c.L, c.E}, kFloat64), k_bf = randn({c.N, c.S, c.E}, kFloat64);
  Tensor q = q_bf.transpose(0, 1), k = k_bf.transpose(0, 1);
  Tensor pad = bool_mask({0, 0, 1, 1, 0, 0, 0, 1}, {2, 4});  // true = ignore
  Tensor forbid = bool_mask({0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0}, {3, 4});
  Tensor add2d = randn({3, 4}, kFloat64);
  Tensor add3d = randn({c.N * c.H, 3, 4}, kFloat64);
  Vec padv = vec(pad.to(kFloat64)), forbidv = vec(forbid.to(kFloat64)), a2 = vec(add2d),
      a3 = vec(add3d);
  auto ref = [&](MaskFn m) {
    return ref_mha(vec(q_bf), vec(k_bf), vec(k_bf), 2, 3, 4, 6, 3, c.attn, m);
  };
  auto run = [&](nn::MhaCallOptions o) {
    auto [out, w] = nn::call(c.attn, q, k, k, o);
    return std::make_pair(out.transpose(0, 1), w);
  };
  for (bool need_weights : {true, false}) {
    std::string nw = need_weights ? " (weights path)" : " (sdpa path)";
    // key_padding_mask and a bool attn_mask together.
    RefAttention r = ref([&](int64_t n, int64_t, int64_t i, int64_t j) {
      return (padv[n * 4 + j] != 0 || forbidv[i * 4 + j] != 0) ? -kInf : 0.0;
    });
    auto [out, w] =
        run({.key_padding_mask = pad, .need_weights = need_weights, .attn_mask = forbid});
    expect_near(out, r.out, 1e-12, "bool masks" + nw);
    EXPECT_EQ(w.defined(), need_weights);
    if (need_weights) expect_near(w, head_mean(r.weights, 2, 3, 3, 4), 1e-12, "bool weights");
    // Float masks: [L, S] and per batch and head [N * H, L, S].
    r = ref([&](int64_t, int64_t, int64_t i, int64_t j) { return a2[i * 4 + j]; });
    expect_near(run({.need_weights = need_weights, .attn_mask = add2d}).first, r.out, 1e-12,
                "float 2d" + nw);
    r = ref([&](int64_t n, int64_t h, int64_t i, int64_t j) {
      return a3[((n * 3 + h) * 3 + i) * 4 + j];
    });
    expect_near(run({.need_weights = need_weights, .attn_mask = add3d}).first, r.out, 1e-12,
                "float 3d" + nw);
    // is_causal alone builds the mask; with a float key_padding_mask too.
    r = ref([&](int64_t, int64_t, int64_t i, int64_t j) { return j > i ? -kInf : 0.0; });
    expect_near(run({.need_weights = need_weights, .is_causal = true}).first, r.out, 1e-12,
                "causal" + nw);
    Tensor pad_float = pad.to(kFloat64) * -1e9;
    r = ref([&](int64_t n, int64_t, int64_t i, int64_t j) {
      return (j > i ? -kInf : 0.0) + padv[n * 4 + j] * -1e9;
    });
    expect_near(
        run({.key_padding_mask = pad_float, .need_weights = need_weights, .is_causal = true}).first,
        r.out, 1e-12, "causal + float padding" + nw);
  }
}

TEST(Attention, MhaFullyMaskedRowsFollowPyTorch) {
  manual_seed(6);
  MhaCase c;
  Tensor q = randn({3, 2, 6}, kFloat64).requires_grad_(true);
  Tensor k = randn({4, 2, 6}, kFloat64);
  Tensor forbid = bool_mask({0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 1}, {3, 4});  // query 1: no key
  // Weights path: the explicit softmax gives NaN (as PyTorch's).
  auto [out, w] = nn::call(c.attn, q, k, k, nn::MhaCallOptions{.attn_mask = forbid});
  Vec o = vec(out), wv = vec(w);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 6; ++e) {
      EXPECT_TRUE(std::isnan(o[(1 * 2 + n) * 6 + e]));
      EXPECT_TRUE(std::isfinite(o[(0 * 2 + n) * 6 + e]));
    }
  EXPECT_TRUE(std::isnan(wv[4]));  // batch 0, query 1
  // need_weights = false: the safe softmax gives zero attention, so out_proj.bias; finite grads.
  Tensor out2 =
      nn::call(c.attn, q, k, k, nn::MhaCallOptions{.need_weights = false, .attn_mask = forbid})
          .first;
  Vec bias = vec(c.attn.out_proj->bias);
  Vec o2 = vec(out2);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t e = 0; e < 6; ++e) EXPECT_NEAR(o2[(1 * 2 + n) * 6 + e], bias[e], 1e-12);
  out2.sum().backward();
  for (double g : vec(q.grad())) EXPECT_TRUE(std::isfinite(g));
}

TEST(Attention, MhaUnbatchedInputs) {
  manual_seed(7);
  for (bool batch_first : {false, true}) {  // ignored without a batch, as in PyTorch
    MhaCase c({.batch_first = batch_first});
    Tensor q = randn({3, 6}, kFloat64), k = randn({4, 6}, kFloat64);
    Tensor pad = bool_mask({0, 1, 0, 0}, {4});
    Tensor per_head = randn({3, 3, 4}, kFloat64);
    Vec padv = vec(pad.to(kFloat64)), ph = vec(per_head);
    auto [out, w] = nn::call(c.attn, q, k, k,
                             nn::MhaCallOptions{.key_padding_mask = pad, .attn_mask = per_head});
    RefAttention r = ref_mha(vec(q), vec(k), vec(k), 1, 3, 4, 6, 3, c.attn,
                             [&](int64_t, int64_t h, int64_t i, int64_t j) {
                               return ph[(h * 3 + i) * 4 + j] + (padv[j] != 0 ? -kInf : 0.0);
                             });
    EXPECT_EQ(out.shape(), (Shape{3, 6}));
    EXPECT_EQ(w.shape(), (Shape{3, 4}));
    expect_near(out, r.out, 1e-12, "unbatched");
    expect_near(w, head_mean(r.weights, 1, 3, 3, 4), 1e-12, "unbatched weights");
  }
}

TEST(Attention, MhaGradientsMatchFiniteDifferences) {
  manual_seed(8);
  for (bool need_weights : {true, false}) {
    nn::MultiheadAttention attn(4, 2, {.batch_first = true});
    attn.to(kFloat64);
    Tensor q = randn({2, 3, 4}, kFloat64), k = randn({2, 2, 4}, kFloat64),
           v = randn({2, 2, 4}, kFloat64);
    Tensor pad = bool_mask({0, 0, 0, 1}, {2, 2});
    Tensor add = randn({3, 2}, kFloat64);
    std::vector<Tensor> wrt = leaves(attn, {q, k, v});
    gradcheck(
        [&] {
          auto [out, w] = nn::call(
              attn, q, k, v,
              nn::MhaCallOptions{
                  .key_padding_mask = pad, .need_weights = need_weights, .attn_mask = add});
          return need_weights ? out + w.sum() : out;
        },
        wrt, need_weights ? "mha weights path" : "mha sdpa path");
  }
}

TEST(Attention, MhaDropoutOnlyWhileTraining) {
  manual_seed(9);
  nn::MultiheadAttention attn(4, 1, {.dropout = 0.5});
  Tensor x = randn({8, 1, 4});
  attn.eval();
  auto [out_eval, w_eval] = nn::call(attn, x, x, x);
  auto [out_eval2, w_eval2] = nn::call(attn, x, x, x);
  EXPECT_EQ(vec(out_eval), vec(out_eval2));
  for (double s : vec(w_eval.sum({-1}))) EXPECT_NEAR(s, 1, 1e-6);
  attn.train();
  auto [out_train, w_train] = nn::call(attn, x, x, x);
  Vec we = vec(w_eval), wt = vec(w_train);
  int zeros = 0;
  for (size_t i = 0; i < we.size(); ++i) {
    if (wt[i] == 0) {
      ++zeros;
    } else {
      EXPECT_NEAR(wt[i], 2 * we[i], 1e-6);  // kept weights are scaled by 1 / (1 - p)
    }
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 64);
}

TEST(Attention, MhaErrors) {
  expect_error([] { nn::MultiheadAttention(10, 3); },
               {"[MultiheadAttention]", "divisible by num_heads", "embed_dim = 10", "num_heads = 3",
                "(e.g. 2)"});
  expect_error([] { nn::MultiheadAttention(0, 2); }, {"positive embed_dim", "Fix"});
  expect_error([] { nn::MultiheadAttention(4, 2, {.dropout = 1.5}); }, {"[0, 1]", "1.5"});
  nn::MultiheadAttention attn(4, 2);
  Tensor x = randn({3, 2, 4});
  auto run = [&](const Tensor& q, const Tensor& k, const Tensor& v, nn::MhaCallOptions o = {}) {
    return [&, q, k, v, o] { nn::call(attn, q, k, v, o); };
  };
  expect_error(run(Tensor(), x, x), {"undefined", "Fix"});
  expect_error(run(randn({2, 3, 2, 4}), x, x),
               {"[L, N, E]", "[L, E] (unbatched)", "float32[2, 3, 2, 4]"});
  expect_error(run(x, randn({3, 4}), randn({3, 4})), {"batched (3-D) key and value"});
  expect_error(run(randn({3, 2, 5}), x, x),
               {"embed_dim = 4", "float32[3, 2, 5]", "MultiheadAttention(5, num_heads)"});
  expect_error(run(x, randn({3, 2, 5}), randn({3, 2, 5})), {"kdim/vdim", "Fix"});
  expect_error(run(x, x, randn({5, 2, 4})), {"key and value of one shape", "float32[5, 2, 4]"});
  expect_error(run(x, randn({3, 5, 4}), randn({3, 5, 4})),
               {"same batch size", "batch_first = false", "Fix"});
  expect_error(run(x, x, x, {.attn_mask = ones({3, 2}, kBool)}),
               {"2-D attn_mask [L, S] = [3, 3]", "bool[3, 2]"});
  expect_error(run(x, x, x, {.attn_mask = ones({2, 3, 3}, kBool)}),
               {"3-D attn_mask [N * num_heads, L, S] = [4, 3, 3]", "bool[2, 3, 3]"});
  expect_error(run(x, x, x, {.attn_mask = ones({1, 4, 3, 3}, kBool)}),
               {"2-D [L, S] or 3-D", "bool[1, 4, 3, 3]"});
  expect_error(run(x, x, x, {.attn_mask = ones({3, 3}, kInt64)}),
               {"bool or floating attn_mask", "int64[3, 3]"});
  expect_error(run(x, x, x, {.key_padding_mask = ones({3, 2}, kBool)}),
               {"key_padding_mask [N, S] = [2, 3]", "bool[3, 2]"});
  expect_error(run(x, x, x, {.key_padding_mask = ones({2, 3}, kInt32)}),
               {"bool or floating key_padding_mask", "int32[2, 3]"});
  Tensor u = randn({3, 4});
  expect_error(run(u, u, u, {.key_padding_mask = ones({2, 3}, kBool)}),
               {"key_padding_mask [S] = [3]"});
}

// ---- TransformerEncoderLayer / TransformerEncoder ----

std::vector<std::string> param_names(nn::Module& m) {
  std::vector<std::string> names;
  for (auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

TEST(Attention, EncoderLayerNamesAndPrintout) {
  nn::TransformerEncoderLayer layer(4, 2, {.dim_feedforward = 8});
  EXPECT_EQ(param_names(layer),
            (std::vector<std::string>{
                "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  EXPECT_EQ(layer.repr(),
            "TransformerEncoderLayer(\n"
            "  (self_attn): MultiheadAttention(\n"
            "    (out_proj): Linear(in_features=4, out_features=4, bias=true)\n"
            "  )\n"
            "  (linear1): Linear(in_features=4, out_features=8, bias=true)\n"
            "  (dropout): Dropout(p=0.1, inplace=false)\n"
            "  (linear2): Linear(in_features=8, out_features=4, bias=true)\n"
            "  (norm1): LayerNorm((4,), eps=1e-05, elementwise_affine=true)\n"
            "  (norm2): LayerNorm((4,), eps=1e-05, elementwise_affine=true)\n"
            "  (dropout1): Dropout(p=0.1, inplace=false)\n"
            "  (dropout2): Dropout(p=0.1, inplace=false)\n"
            ")");
  nn::TransformerEncoderLayer no_bias(4, 2, {.dim_feedforward = 8, .bias = false});
  EXPECT_EQ(param_names(no_bias),
            (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.out_proj.weight",
                                      "linear1.weight", "linear2.weight", "norm1.weight",
                                      "norm2.weight"}));
}

TEST(Attention, EncoderLayerMatchesReference) {
  manual_seed(10);
  for (bool norm_first : {false, true})
    for (auto act : {nn::TransformerActivation::ReLU, nn::TransformerActivation::GELU})
      for (bool batch_first : {false, true}) {
        nn::TransformerEncoderLayer layer(6, 2,
                                          {.dim_feedforward = 10,
                                           .dropout = 0.0,
                                           .activation = act,
                                           .batch_first = batch_first,
                                           .norm_first = norm_first});
        layer.to(kFloat64);
        {
          NoGradGuard g;  // non-trivial norms
          for (auto* ln : {layer.norm1.get(), layer.norm2.get()}) {
            ln->weight.detach().copy_(randn({6}, kFloat64) * 0.3 + 1);
            ln->bias.detach().copy_(randn({6}, kFloat64) * 0.3);
          }
        }
        Tensor x_bf = randn({2, 3, 6}, kFloat64);
        Tensor x = batch_first ? x_bf : x_bf.transpose(0, 1);
        Tensor pad = bool_mask({0, 0, 1, 0, 0, 0}, {2, 3});
        Vec padv = vec(pad.to(kFloat64));
        std::string where = nn::transformer_activation_name(act) +
                            std::string(norm_first ? " norm_first" : " post-norm") +
                            (batch_first ? " batch_first" : "");
        auto back = [&](const Tensor& y) { return batch_first ? y : y.transpose(0, 1); };
        expect_near(back(layer(x)), ref_encoder_layer(vec(x_bf), 2, 3, layer), 1e-11, where);
        expect_near(back(nn::call(layer, x, Tensor(), pad, true)),
                    ref_encoder_layer(vec(x_bf), 2, 3, layer,
                                      [&](int64_t n, int64_t, int64_t i, int64_t j) {
                                        return (j > i || padv[n * 3 + j] != 0) ? -kInf : 0.0;
                                      }),
                    1e-11, where + " masked");
      }
}

TEST(Attention, EncoderLayerGradientsMatchFiniteDifferences) {
  manual_seed(11);
  for (bool norm_first : {false, true}) {
    nn::TransformerEncoderLayer layer(4, 2,
                                      {.dim_feedforward = 6,
                                       .dropout = 0,
                                       .activation = nn::TransformerActivation::GELU,
                                       .norm_first = norm_first});
    layer.to(kFloat64);
    Tensor x = randn({3, 2, 4}, kFloat64);
    Tensor mask = randn({3, 3}, kFloat64);
    std::vector<Tensor> wrt = leaves(layer, {x});
    gradcheck([&] { return nn::call(layer, x, mask); }, wrt,
              norm_first ? "encoder layer norm_first" : "encoder layer");
  }
}

TEST(Attention, EncoderLayerDropoutRespectsEval) {
  manual_seed(12);
  nn::TransformerEncoderLayer layer(4, 2, {.dim_feedforward = 8, .dropout = 0.5});
  layer.to(kFloat64);
  Tensor x = randn({5, 2, 4}, kFloat64);
  Vec want = ref_encoder_layer(vec(x.transpose(0, 1)), 2, 5, layer);
  layer.eval();
  expect_near(layer(x).transpose(0, 1), want, 1e-11, "eval");
  layer.train();
  Vec trained = vec(layer(x).transpose(0, 1));
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::abs(trained[i] - want[i]));
  EXPECT_GT(diff, 1e-3);
}

TEST(Attention, EncoderLayerInSequentialAndUnbatched) {
  manual_seed(13);
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(4, 2,
                                                             nn::TransformerEncoderLayerOptions{
                                                                 .dim_feedforward = 8,
                                                                 .dropout = 0,
                                                             });
  nn::Sequential seq(layer);
  Tensor x = randn({5, 2, 4});
  EXPECT_EQ(vec(seq(x)), vec(nn::call(*layer, x, Tensor())));
  Tensor u = randn({5, 4});  // unbatched [S, E]
  expect_near((*layer)(u), vec(nn::call(*layer, u.unsqueeze(1), Tensor()).squeeze(1)), 1e-6,
              "unbatched");
}

TEST(Attention, EncoderStacksCopiesAndPassesMasks) {
  manual_seed(14);
  auto proto = std::make_shared<nn::TransformerEncoderLayer>(
      4, 2, nn::TransformerEncoderLayerOptions{.dim_feedforward = 8, .dropout = 0});
  proto->to(kFloat64);
  nn::TransformerEncoder encoder(proto, 2, std::make_shared<nn::LayerNorm>(4));
  encoder.to(kFloat64);
  std::vector<std::string> names = param_names(encoder);
  EXPECT_EQ(names.size(), 2 * 12 + 2u);
  EXPECT_EQ(names.front(), "layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(names[12], "layers.1.self_attn.in_proj_weight");
  EXPECT_EQ(names.back(), "norm.bias");
  // The layers start as copies of the template (PyTorch's deep copies), not shared tensors.
  auto l0 = encoder.layers->at<nn::TransformerEncoderLayer>(0);
  auto l1 = encoder.layers->at<nn::TransformerEncoderLayer>(1);
  EXPECT_EQ(vec(l0->linear1->weight), vec(proto->linear1->weight));
  EXPECT_EQ(vec(l1->self_attn->in_proj_weight), vec(proto->self_attn->in_proj_weight));
  EXPECT_FALSE(l0->linear1->weight.is_same(proto->linear1->weight));
  {
    NoGradGuard g;  // make the layers differ
    l1->linear1->weight.detach().mul_(-1.5);
  }
  Tensor x = randn({3, 2, 4}, kFloat64);
  Tensor pad = bool_mask({0, 0, 1, 0, 0, 0}, {2, 3});
  Tensor want =
      (*encoder.norm)(nn::call(*l1, nn::call(*l0, x, Tensor(), pad, true), Tensor(), pad, true));
  expect_near(nn::call(encoder, x, Tensor(), pad, true), vec(want), 0, "masked stack");
  nn::TransformerEncoder plain(proto, 1);
  EXPECT_EQ(param_names(plain).size(), 12u);
  EXPECT_EQ(plain.norm.get(), nullptr);
  EXPECT_EQ(vec(plain(x)), vec((*proto)(x)));
}

TEST(Attention, CallPathsReachTheAttention) {
  auto proto = std::make_shared<nn::TransformerEncoderLayer>(4, 2);
  nn::TransformerEncoder encoder(proto, 2);
  std::vector<std::string> paths;
  for (int i = 0; i < 2; ++i) {
    auto layer = encoder.layers->at<nn::TransformerEncoderLayer>(i);
    layer->self_attn->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) {
      paths.push_back(nn::call_stack().back().path + " " + std::to_string(in.size()));
    });
  }
  encoder(randn({3, 2, 4}));
  EXPECT_EQ(paths, (std::vector<std::string>{"layers.0.self_attn 3", "layers.1.self_attn 3"}));
  // Errors raised inside name the module path.
  expect_error(
      [&] {
        nn::call(encoder, randn({3, 2, 4}), Tensor(), ones({3, 2}, kBool));
      },
      {"key_padding_mask [N, S] = [2, 3]",
       "(in module layers.0.self_attn, "
       "MultiheadAttention)"});
}

TEST(Attention, EncoderErrors) {
  expect_error([] { nn::TransformerEncoderLayer(4, 2, {.dim_feedforward = 0}); },
               {"positive dim_feedforward", "got 0"});
  expect_error([] { nn::TransformerEncoderLayer(6, 4); }, {"divisible by num_heads"});
  expect_error([] { nn::TransformerEncoder(nullptr, 2); }, {"no encoder layer", "Fix"});
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(4, 2);
  expect_error([&] { nn::TransformerEncoder(layer, -1); }, {"num_layers >= 0", "-1"});
  // The stack deep-copies its template as it is, as PyTorch's copy.deepcopy, additions too.
  layer->register_parameter("extra", ones({1}));
  nn::TransformerEncoder modified(layer, 2);
  EXPECT_EQ(modified.parameters().size(), 2 * 13u);
  EXPECT_NE(modified.layers->at<nn::TransformerEncoderLayer>(1)->find_parameter("extra"), nullptr);
}

}  // namespace
}  // namespace kiln
