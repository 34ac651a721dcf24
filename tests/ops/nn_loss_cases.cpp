// OpCases for the loss ops (nll_loss, nll_loss_backward, binary_cross_entropy,
// binary_cross_entropy_with_logits) and the composite losses built on them and on
// elementwise ops (cross_entropy, mse_loss, l1_loss).
#include <cmath>

#include "harness.h"
#include "kiln/ops/loss.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

// Element (n, cls, s) of an [N, C, S...] (or [C]) input as a flat offset; target element i.
int64_t class_offset(const Shape& input, int64_t i, int64_t cls) {
  if (input.size() == 1) return cls;
  int64_t inner = 1;
  for (size_t d = 2; d < input.size(); ++d) inner *= input[d];
  return (i / inner) * input[1] * inner + cls * inner + i % inner;
}
int64_t num_classes(const Shape& input) {
  return input.size() == 1 ? input[0] : input[1];
}

Ref reduce_ref(const std::vector<double>& per, const Shape& shape, const std::string& reduction,
               double divisor) {
  if (reduction == "none") return Ref{shape, per};
  double s = 0;
  for (double v : per) s += v;
  return Ref{Shape{}, {reduction == "sum" ? s : s / divisor}};
}

// nll_loss with optional weight (empty Ref = none).
Ref nll_ref(const Ref& x, const Ref& t, const Ref* w, int64_t ignore,
            const std::string& reduction) {
  std::vector<double> per(t.v.size());
  double wsum = 0;
  for (size_t i = 0; i < t.v.size(); ++i) {
    int64_t cls = static_cast<int64_t>(t.v[i]);
    if (cls == ignore) continue;
    double wi = w ? w->v[cls] : 1.0;
    per[i] = -wi * x.v[class_offset(x.shape, static_cast<int64_t>(i), cls)];
    wsum += wi;
  }
  return reduce_ref(per, t.shape, reduction, wsum);
}

// log_softmax over the class dim, by plain loops.
Ref log_softmax_classes(const Ref& x) {
  Ref r = x;
  const int64_t C = num_classes(x.shape);
  const int64_t samples = x.numel() / std::max<int64_t>(C, 1);
  for (int64_t i = 0; i < samples; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x.v[class_offset(x.shape, i, c)]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(x.v[class_offset(x.shape, i, c)] - m);
    for (int64_t c = 0; c < C; ++c)
      r.v[class_offset(x.shape, i, c)] = x.v[class_offset(x.shape, i, c)] - m - std::log(s);
  }
  return r;
}

// PyTorch's cross_entropy with class indices: (1 - eps) nll + eps / C * smooth, both
// normalized by the summed target weights for "mean".
Ref cross_entropy_ref(const Ref& x, const Ref& t, const Ref* w, int64_t ignore,
                      const std::string& reduction, double eps) {
  Ref lp = log_softmax_classes(x);
  const int64_t C = num_classes(x.shape);
  std::vector<double> per(t.v.size());
  double wsum = 0;
  for (size_t i = 0; i < t.v.size(); ++i) {
    int64_t cls = static_cast<int64_t>(t.v[i]);
    if (cls == ignore) continue;
    double wi = w ? w->v[cls] : 1.0;
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c)
      smooth -= (w ? w->v[c] : 1.0) * lp.v[class_offset(x.shape, static_cast<int64_t>(i), c)];
    per[i] = (1 - eps) * -wi * lp.v[class_offset(x.shape, static_cast<int64_t>(i), cls)] +
             eps / C * smooth;
    wsum += wi;
  }
  return reduce_ref(per, t.shape, reduction, wsum);
}

// cross_entropy with class probabilities (same shape as x).
Ref cross_entropy_probs_ref(const Ref& x, const Ref& p, const std::string& reduction, double eps) {
  Ref lp = log_softmax_classes(x);
  const int64_t C = num_classes(x.shape);
  const int64_t samples = x.numel() / C;
  std::vector<double> per(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i)
    for (int64_t c = 0; c < C; ++c) {
      int64_t o = class_offset(x.shape, i, c);
      per[i] -= (p.v[o] * (1 - eps) + eps / C) * lp.v[o];
    }
  Shape s;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (d != (x.shape.size() == 1 ? 0 : 1)) s.push_back(x.shape[d]);
  return reduce_ref(per, s, reduction, static_cast<double>(samples));
}

// Calls a table op directly (the gradient ops have no user-facing function).
Tensor run_op(const OpDef& op, Tensors inputs, const Attrs& attrs) {
  init();
  return dispatch1(op, inputs, attrs);
}

Input idx(Shape s, int64_t high) {
  return Input{s, Gen::Index, kInt64, high, false};
}
Input vec(Shape s, Gen g = Gen::Positive) {
  return Input{s, g, std::nullopt, 0, false};
}

OpCase nll_case(std::string label, std::string reduction, int64_t ignore, bool weighted,
                std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "nll_loss";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    return F::nll_loss(in[0], in[1], {weighted ? in[2] : Tensor(), ignore, reduction});
  };
  c.ref = [=](const std::vector<Ref>& r) {
    return nll_ref(r[0], r[1], weighted ? &r[2] : nullptr, ignore, reduction);
  };
  return c;
}

OpCase ce_case(std::string label, std::string reduction, int64_t ignore, bool weighted, double eps,
               std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "nll_loss";
  c.label = "cross_entropy_" + label;
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    return F::cross_entropy(in[0], in[1], {weighted ? in[2] : Tensor(), ignore, reduction, eps});
  };
  c.ref = [=](const std::vector<Ref>& r) {
    return cross_entropy_ref(r[0], r[1], weighted ? &r[2] : nullptr, ignore, reduction, eps);
  };
  return c;
}

// Inputs in (0.05, 0.95) for binary_cross_entropy: Gen::Unit mapped by x / 2 + 1/2.
Tensor unit_interval(const Tensor& t) {
  return t * 0.5 + 0.5;
}
double unit_interval(double v) {
  return v * 0.5 + 0.5;
}

double bce_ref(double x, double t) {
  return -(t * std::max(std::log(x), -100.0) + (1 - t) * std::max(std::log(1 - x), -100.0));
}
double bce_logits_ref(double x, double t, double pw) {
  double s = 1 / (1 + std::exp(-x));
  return -(pw * t * std::log(s) + (1 - t) * std::log(1 - s));
}

Ref reduce_all(const Ref& r, const std::string& reduction) {
  return reduce_ref(r.v, r.shape, reduction, static_cast<double>(r.numel()));
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // ---- nll_loss ----
  for (std::string red : {"mean", "sum", "none"}) {
    out.push_back(nll_case(
        "2d_" + red, red, -100, false,
        {{{{4, 5}}, idx({4}, 5)}, {{{1, 3}}, idx({1}, 3)}, {{{256, 40}}, idx({256}, 40)}}));
    out.push_back(
        nll_case("weighted_ignore_" + red, red, 2, true,
                 {{{{6, 4}}, idx({6}, 4), vec({4})}, {{{2, 3, 4}}, idx({2, 4}, 3), vec({3})}}));
  }
  out.push_back(nll_case("spatial", "mean", -100, false, {{{{2, 3, 4, 2}}, idx({2, 4, 2}, 3)}}));
  out.push_back(nll_case("unbatched", "sum", -100, true, {{{{5}}, idx({}, 5), vec({5})}}));
  {
    // Every target ignored: the mean is 0/0 = nan, as in PyTorch.
    OpCase c = nll_case("all_ignored", "mean", 0, false,
                        {{{{3, 2}}, Input{{3}, Gen::Index, kInt64, 1, false}}});
    c.gradcheck = false;
    out.push_back(c);
  }
  // ---- nll_loss_backward (called directly; its vjp is nll_loss) ----
  for (std::string red : {"mean", "none"}) {
    OpCase c;
    c.op = "nll_loss_backward";
    c.label = red;
    c.runs = {{red == "none" ? Input{{5}} : Input{{}}, idx({5}, 4), vec({4})}};
    c.fn = [red](const std::vector<Tensor>& in) {
      ops::NllLossBackwardAttrs a;
      a.ignore_index = 1;
      a.reduction = red;
      a.input_shape = {5, 4};
      return run_op(ops::nll_loss_backward, {in[0], in[1], in[2]}, a);
    };
    c.ref = [red](const std::vector<Ref>& r) {
      Ref out{Shape{5, 4}, std::vector<double>(20)};
      double wsum = 0;
      for (double t : r[1].v)
        if (t != 1) wsum += r[2].v[static_cast<size_t>(t)];
      for (size_t i = 0; i < 5; ++i) {
        int64_t t = static_cast<int64_t>(r[1].v[i]);
        if (t == 1) continue;
        double g = red == "none" ? r[0].v[i] : r[0].v[0] / wsum;
        out.v[i * 4 + t] = -r[2].v[t] * g;
      }
      return out;
    };
    out.push_back(c);
  }
  // ---- cross_entropy (log_softmax + nll_loss + label smoothing) ----
  for (std::string red : {"mean", "sum", "none"}) {
    out.push_back(ce_case("plain_" + red, red, -100, false, 0.0,
                          {{{{4, 5}}, idx({4}, 5)}, {{{128, 30}}, idx({128}, 30)}}));
    out.push_back(
        ce_case("smooth_ignore_weight_" + red, red, 1, true, 0.2,
                {{{{6, 4}}, idx({6}, 4), vec({4})}, {{{2, 3, 5}}, idx({2, 5}, 3), vec({3})}}));
    out.push_back(ce_case("smooth_ignore_" + red, red, 0, false, 0.1, {{{{5, 3}}, idx({5}, 3)}}));
  }
  out.push_back(ce_case("unbatched", "mean", -100, false, 0.3, {{{{6}}, idx({}, 6)}}));
  for (double eps : {0.0, 0.25}) {
    for (std::string red : {"mean", "none"}) {
      OpCase c;
      c.op = "log_softmax";
      c.label = "cross_entropy_probs_" + red + (eps > 0 ? "_smooth" : "");
      c.runs = {{{{4, 5}}, {{4, 5}, Gen::Positive}}, {{{2, 3, 4}}, {{2, 3, 4}, Gen::Positive}}};
      c.fn = [=](const std::vector<Tensor>& in) {
        return F::cross_entropy(in[0], in[1], {.reduction = red, .label_smoothing = eps});
      };
      c.ref = [=](const std::vector<Ref>& r) {
        return cross_entropy_probs_ref(r[0], r[1], red, eps);
      };
      out.push_back(c);
    }
  }
  // ---- mse_loss and l1_loss (elementwise compositions) ----
  for (std::string red : {"mean", "sum", "none"}) {
    OpCase m;
    m.op = "square";
    m.label = "mse_loss_" + red;
    m.runs = {{{{3, 4}}, {{3, 4}}}, {{{3, 4}}, {{4}}}, {{{200, 30}}, {{200, 30}}}};
    m.fn = [red](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1], red); };
    m.ref = [red](const std::vector<Ref>& r) {
      return reduce_all(ref_map2(r[0], r[1], [](double a, double b) { return (a - b) * (a - b); }),
                        red);
    };
    m.f32_tol = 1e-4;
    out.push_back(m);
    OpCase l = m;
    l.op = "abs";
    l.label = "l1_loss_" + red;
    l.fn = [red](const std::vector<Tensor>& in) { return F::l1_loss(in[0], in[1], red); };
    l.ref = [red](const std::vector<Ref>& r) {
      return reduce_all(ref_map2(r[0], r[1], [](double a, double b) { return std::fabs(a - b); }),
                        red);
    };
    out.push_back(l);
  }
  // ---- binary_cross_entropy ----
  for (std::string red : {"mean", "sum", "none"}) {
    OpCase c;
    c.op = "binary_cross_entropy";
    c.label = red;
    c.runs = {{{{3, 4}, Gen::Unit}, {{3, 4}, Gen::Unit}},
              {{{128, 64}, Gen::Unit}, {{128, 64}, Gen::Unit}}};
    c.fn = [red](const std::vector<Tensor>& in) {
      return F::binary_cross_entropy(unit_interval(in[0]), unit_interval(in[1]), Tensor(), red);
    };
    c.ref = [red](const std::vector<Ref>& r) {
      return reduce_all(
          ref_map2(r[0], r[1],
                   [](double x, double t) { return bce_ref(unit_interval(x), unit_interval(t)); }),
          red);
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  {
    OpCase c;
    c.op = "binary_cross_entropy";
    c.label = "weighted";
    c.runs = {{{{3, 4}, Gen::Unit}, {{3, 4}, Gen::Unit}, vec({4})}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::binary_cross_entropy(unit_interval(in[0]), unit_interval(in[1]), in[2], "sum");
    };
    c.ref = [](const std::vector<Ref>& r) {
      Ref l = ref_map2(r[0], r[1], [](double x, double t) {
        return bce_ref(unit_interval(x), unit_interval(t));
      });
      return reduce_all(ref_map2(l, r[2], [](double a, double b) { return a * b; }), "sum");
    };
    out.push_back(c);
  }
  {
    // Inputs at exactly 0 and 1: the logs clamp at -100, so the loss stays finite.
    OpCase c;
    c.op = "binary_cross_entropy";
    c.label = "clamped_logs";
    c.runs = {{{{2, 3}, Gen::Bool}, {{2, 3}, Gen::Unit}}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::binary_cross_entropy(in[0], unit_interval(in[1]), {}, "none");
    };
    c.ref = [](const std::vector<Ref>& r) {
      return ref_map2(r[0], r[1], [](double x, double t) { return bce_ref(x, unit_interval(t)); });
    };
    c.gradcheck = false;
    out.push_back(c);
  }
  // ---- binary_cross_entropy_with_logits ----
  for (bool pos : {false, true}) {
    for (std::string red : {"mean", "none"}) {
      OpCase c;
      c.op = "binary_cross_entropy_with_logits";
      c.label = std::string(pos ? "pos_weight_" : "") + red;
      c.runs = {{{{3, 4}}, {{3, 4}, Gen::Unit}, {{4}, Gen::Positive}, vec({3, 4})},
                {{{100, 70}}, {{100, 70}, Gen::Unit}, {{70}, Gen::Positive}, vec({100, 70})}};
      c.fn = [=](const std::vector<Tensor>& in) {
        return F::binary_cross_entropy_with_logits(in[0], unit_interval(in[1]), in[3], red,
                                                   pos ? in[2] : Tensor());
      };
      c.ref = [=](const std::vector<Ref>& r) {
        Ref l = ref_map3(r[0], r[1], r[2], [=](double x, double t, double pw) {
          return bce_logits_ref(x, unit_interval(t), pos ? pw : 1.0);
        });
        return reduce_all(ref_map2(l, r[3], [](double a, double w) { return a * w; }), red);
      };
      c.f32_tol = 1e-4;
      out.push_back(c);
    }
  }
  {
    // Large logits: the stable form stays finite where log(sigmoid(x)) would not.
    OpCase c;
    c.op = "binary_cross_entropy_with_logits";
    c.label = "large_logits";
    c.runs = {{{{2, 5}}, {{2, 5}, Gen::Bool}}};
    c.fn = [](const std::vector<Tensor>& in) {
      return F::binary_cross_entropy_with_logits(in[0] * 100.0, in[1], {}, "none");
    };
    c.ref = [](const std::vector<Ref>& r) {
      return ref_map2(r[0], r[1], [](double x, double t) {
        x *= 100;  // softplus(-x) + (1 - t) x, written directly
        return (1 - t) * x + std::max(-x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
      });
    };
    c.gradcheck = false;
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  return out;
}

Register loss_cases(cases());

}  // namespace
}  // namespace kiln::testing
