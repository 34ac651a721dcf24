// OpCases for layer_norm and batch_norm (training and eval), including gradients that
// reach the saved statistics outputs (what double backward produces).
#include <cmath>

#include "harness.h"
#include "kiln/ops/norm.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

Tensor undefined_or(bool use, const Tensor& t) {
  return use ? t : Tensor();
}

// Normalizes rows of `n` trailing elements; w/b (may be null) have n entries.
Ref layer_norm_ref(const Ref& x, int64_t n, const Ref* w, const Ref* b, double eps) {
  Ref r = x;
  for (int64_t row = 0; row * n < x.numel(); ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += x.v[row * n + i];
    mean /= n;
    for (int64_t i = 0; i < n; ++i) var += (x.v[row * n + i] - mean) * (x.v[row * n + i] - mean);
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      double y = (x.v[row * n + i] - mean) / std::sqrt(var + eps);
      r.v[row * n + i] = y * (w ? w->v[i] : 1.0) + (b ? b->v[i] : 0.0);
    }
  }
  return r;
}

// x [N, C, S...]: per channel c, normalize with the given (or the batch's biased) stats.
Ref batch_norm_ref(const Ref& x, const Ref* w, const Ref* b, const Ref* rm, const Ref* rv,
                   bool training, double eps) {
  const int64_t N = x.shape[0], C = x.shape[1], S = x.numel() / (N * C);
  Ref r = x;
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    if (training) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) mean += x.v[(n * C + c) * S + s];
      mean /= N * S;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) var += std::pow(x.v[(n * C + c) * S + s] - mean, 2);
      var /= N * S;
    } else {
      mean = rm->v[c];
      var = rv->v[c];
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        double& y = r.v[(n * C + c) * S + s];
        y = (x.v[(n * C + c) * S + s] - mean) / std::sqrt(var + eps) * (w ? w->v[c] : 1.0) +
            (b ? b->v[c] : 0.0);
      }
  }
  return r;
}

Input fixed(Shape s, Gen g) {
  return Input{s, g, std::nullopt, 0, false};
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // ---- layer_norm ----
  for (bool affine : {true, false}) {
    OpCase c;
    c.op = "layer_norm";
    c.label = affine ? "affine" : "plain";
    c.runs = {{{{4, 6}}, {{6}}, {{6}}},
              {{{3, 1, 5}}, {{5}}, {{5}}},
              {{{64, 768}}, {{768}}, {{768}}},
              {{{0, 5}}, {{5}}, {{5}}}};
    c.fn = [affine](const std::vector<Tensor>& in) {
      return F::layer_norm(in[0], {in[0].size(-1)}, undefined_or(affine, in[1]),
                           undefined_or(affine, in[2]));
    };
    c.ref = [affine](const std::vector<Ref>& r) {
      return layer_norm_ref(r[0], r[0].shape.back(), affine ? &r[1] : nullptr,
                            affine ? &r[2] : nullptr, 1e-5);
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    OpCase c;
    c.op = "layer_norm";
    c.label = "two_dims_weight_only";
    c.runs = {{{{2, 3, 4}}, {{3, 4}}}, {{{5, 2, 3}}, {{2, 3}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::layer_norm(in[0], {in[0].size(1), in[0].size(2)}, in[1], Tensor(), 1e-3);
    };
    c.ref = [](const std::vector<Ref>& r) {
      return layer_norm_ref(r[0], r[0].shape[1] * r[0].shape[2], &r[1], nullptr, 1e-3);
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    // Gradients into the mean and rstd outputs (the op called directly).
    OpCase c;
    c.op = "layer_norm";
    c.label = "stats_outputs";
    c.runs = {{{{3, 5}}, {{5}}, {{5}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      init();
      ops::LayerNormAttrs a;
      a.normalized_shape = {5};
      Tensors o = dispatch(ops::layer_norm, Tensors{in[0], in[1], in[2]}, a);
      return o[0] + o[1] * 3.0 + o[2] * o[2];
    };
    c.ref = [](const std::vector<Ref>& r) {
      Ref out = layer_norm_ref(r[0], 5, &r[1], &r[2], 1e-5);
      for (int64_t row = 0; row < 3; ++row) {
        double mean = 0, var = 0;
        for (int i = 0; i < 5; ++i) mean += r[0].v[row * 5 + i] / 5;
        for (int i = 0; i < 5; ++i) var += std::pow(r[0].v[row * 5 + i] - mean, 2) / 5;
        for (int i = 0; i < 5; ++i) out.v[row * 5 + i] += 3 * mean + 1 / (var + 1e-5);
      }
      return out;
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  // ---- batch_norm ----
  for (bool affine : {true, false}) {
    OpCase c;
    c.op = "batch_norm";
    c.label = std::string("training_") + (affine ? "affine" : "plain");
    c.runs = {{{{4, 3}}, {{3}}, {{3}}},
              {{{2, 3, 4, 5}}, {{3}}, {{3}}},
              {{{3, 2, 7}}, {{2}}, {{2}}},
              {{{512, 64}}, {{64}}, {{64}}},
              {{{8, 16, 20, 20}}, {{16}}, {{16}}}};
    c.fn = [affine](const std::vector<Tensor>& in) {
      return F::batch_norm(in[0], Tensor(), Tensor(), undefined_or(affine, in[1]),
                           undefined_or(affine, in[2]), true);
    };
    c.ref = [affine](const std::vector<Ref>& r) {
      return batch_norm_ref(r[0], affine ? &r[1] : nullptr, affine ? &r[2] : nullptr, nullptr,
                            nullptr, true, 1e-5);
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    OpCase c;
    c.op = "batch_norm";
    c.label = "eval";
    c.runs = {
        {{{4, 3}}, {{3}}, {{3}}, fixed({3}, Gen::Uniform), fixed({3}, Gen::Positive)},
        {{{2, 3, 4, 5}}, {{3}}, {{3}}, fixed({3}, Gen::Uniform), fixed({3}, Gen::Positive)},
        {{{16, 8, 30, 30}}, {{8}}, {{8}}, fixed({8}, Gen::Uniform), fixed({8}, Gen::Positive)}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::batch_norm(in[0], in[3], in[4], in[1], in[2], false, 0.1, 1e-3);
    };
    c.ref = [](const std::vector<Ref>& r) {
      return batch_norm_ref(r[0], &r[1], &r[2], &r[3], &r[4], false, 1e-3);
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    // Training with running stats, differentiating through every output: the batch
    // statistics and the updated running statistics (the op called directly).
    OpCase c;
    c.op = "batch_norm";
    c.label = "stats_outputs";
    c.runs = {{{{3, 2, 4}}, {{2}}, {{2}}, fixed({2}, Gen::Uniform), fixed({2}, Gen::Positive)}};
    c.fn = [](const std::vector<Tensor>& in) {
      init();
      ops::BatchNormAttrs a;
      a.training = true;
      a.momentum = 0.3;
      Tensors o = dispatch(ops::batch_norm, Tensors{in[0], in[1], in[2], in[3], in[4]}, a);
      Tensor stats = o[1] * 2.0 + o[2] * o[2] + o[3] * 5.0 + o[4] * 7.0;
      return o[0] + stats.reshape({1, 2, 1});
    };
    c.ref = [](const std::vector<Ref>& r) {
      Ref out = batch_norm_ref(r[0], &r[1], &r[2], nullptr, nullptr, true, 1e-5);
      for (int c2 = 0; c2 < 2; ++c2) {
        double mean = 0, var = 0;
        for (int n = 0; n < 3; ++n)
          for (int s = 0; s < 4; ++s) mean += r[0].v[(n * 2 + c2) * 4 + s] / 12;
        for (int n = 0; n < 3; ++n)
          for (int s = 0; s < 4; ++s) var += std::pow(r[0].v[(n * 2 + c2) * 4 + s] - mean, 2) / 12;
        double new_mean = 0.7 * r[3].v[c2] + 0.3 * mean,
               new_var = 0.7 * r[4].v[c2] + 0.3 * var * 12 / 11;
        double extra = 2 * mean + 1 / (var + 1e-5) + 5 * new_mean + 7 * new_var;
        for (int n = 0; n < 3; ++n)
          for (int s = 0; s < 4; ++s) out.v[(n * 2 + c2) * 4 + s] += extra;
      }
      return out;
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  // ---- layer_norm_backward / batch_norm_backward (called directly on statistics from the
  // forward; the gradchecks exercise their vjps, i.e. double backward) ----
  const char* parts[] = {"grad_x", "grad_weight", "grad_bias"};
  for (int k = 0; k < 3; ++k) {
    for (bool weighted : {true, false}) {
      OpCase c;
      c.op = "layer_norm_backward";
      c.label = std::string(parts[k]) + (weighted ? "" : "_no_weight");
      c.runs = {{{{3, 5}}, {{3, 5}}, {{5}}},
                {{{2, 2, 3}}, {{2, 2, 3}}, {{3}}},
                {{{64, 256}}, {{64, 256}}, {{256}}}};
      c.fn = [=](const std::vector<Tensor>& in) {
        init();
        ops::LayerNormAttrs a;
        a.normalized_shape = {in[1].size(-1)};
        Tensor w = undefined_or(weighted, in[2]);
        Tensors fwd = dispatch(ops::layer_norm, Tensors{in[1], w, Tensor()}, a);
        return dispatch(ops::layer_norm_backward, Tensors{in[0], in[1], w, fwd[1], fwd[2]}, a)[k];
      };
      c.ref = [=](const std::vector<Ref>& r) {
        const int64_t n = r[1].shape.back(), rows = r[1].numel() / n;
        Ref gx = r[1], gw{Shape{n}, std::vector<double>(n)}, gb = gw;
        for (int64_t row = 0; row < rows; ++row) {
          double mean = 0, var = 0;
          for (int64_t i = 0; i < n; ++i) mean += r[1].v[row * n + i] / n;
          for (int64_t i = 0; i < n; ++i) var += std::pow(r[1].v[row * n + i] - mean, 2) / n;
          const double rs = 1 / std::sqrt(var + 1e-5);
          double s1 = 0, s2 = 0;
          for (int64_t i = 0; i < n; ++i) {
            double xhat = (r[1].v[row * n + i] - mean) * rs,
                   gy = r[0].v[row * n + i] * (weighted ? r[2].v[i] : 1);
            s1 += gy / n;
            s2 += gy * xhat / n;
            gw.v[i] += r[0].v[row * n + i] * xhat;
            gb.v[i] += r[0].v[row * n + i];
          }
          for (int64_t i = 0; i < n; ++i) {
            double xhat = (r[1].v[row * n + i] - mean) * rs,
                   gy = r[0].v[row * n + i] * (weighted ? r[2].v[i] : 1);
            gx.v[row * n + i] = rs * (gy - s1 - xhat * s2);
          }
        }
        return k == 0 ? gx : k == 1 ? gw : gb;
      };
      c.f32_tol = 1e-4;
      out.push_back(c);
    }
    OpCase b;
    b.op = "batch_norm_backward";
    b.label = parts[k];
    b.runs = {{{{4, 3}}, {{4, 3}}, {{3}}},
              {{{2, 3, 2, 3}}, {{2, 3, 2, 3}}, {{3}}},
              {{{8, 16, 10, 10}}, {{8, 16, 10, 10}}, {{16}}}};
    b.fn = [=](const std::vector<Tensor>& in) {
      init();
      ops::BatchNormAttrs a;
      a.training = true;
      Tensors fwd =
          dispatch(ops::batch_norm, Tensors{in[1], in[2], Tensor(), Tensor(), Tensor()}, a);
      return dispatch(ops::batch_norm_backward, Tensors{in[0], in[1], in[2], fwd[1], fwd[2]}, a)[k];
    };
    b.ref = [=](const std::vector<Ref>& r) {
      const Shape& xs = r[1].shape;
      const int64_t N = xs[0], C = xs[1], S = r[1].numel() / (N * C);
      const double n = static_cast<double>(N * S);
      Ref gx = r[1], gw{Shape{C}, std::vector<double>(C)}, gb = gw;
      for (int64_t ch = 0; ch < C; ++ch) {
        auto at = [&](int64_t i, int64_t s) { return static_cast<size_t>((i * C + ch) * S + s); };
        double mean = 0, var = 0;
        for (int64_t i = 0; i < N; ++i)
          for (int64_t s = 0; s < S; ++s) mean += r[1].v[at(i, s)] / n;
        for (int64_t i = 0; i < N; ++i)
          for (int64_t s = 0; s < S; ++s) var += std::pow(r[1].v[at(i, s)] - mean, 2) / n;
        const double rs = 1 / std::sqrt(var + 1e-5);
        double sg = 0, sgx = 0;
        for (int64_t i = 0; i < N; ++i)
          for (int64_t s = 0; s < S; ++s) {
            sg += r[0].v[at(i, s)];
            sgx += r[0].v[at(i, s)] * (r[1].v[at(i, s)] - mean) * rs;
          }
        gw.v[ch] = sgx;
        gb.v[ch] = sg;
        for (int64_t i = 0; i < N; ++i)
          for (int64_t s = 0; s < S; ++s) {
            double xhat = (r[1].v[at(i, s)] - mean) * rs;
            gx.v[at(i, s)] = rs * r[2].v[ch] * (r[0].v[at(i, s)] - sg / n - xhat * sgx / n);
          }
      }
      return k == 0 ? gx : k == 1 ? gw : gb;
    };
    b.f32_tol = 1e-4;
    out.push_back(b);
  }
  return out;
}

Register norm_cases(cases());

}  // namespace
}  // namespace kiln::testing
