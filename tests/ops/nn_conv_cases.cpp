// OpCases for conv2d and its gradient ops (conv2d_input_grad, conv2d_weight_grad), with
// plain-loop references: the convolution sum written out tap by tap.
#include "harness.h"
#include "kiln/ops/conv.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

struct Params {
  Shape stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// Calls f(n, oc, oh, ow, c, ih, iw, ki, kj) for every tap of the convolution that reads
// inside the input, with flat offsets into x [N, C, H, W], w and out.
template <class Fn>
void for_each_tap(const Shape& x, const Shape& w, const Params& p, Fn f) {
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3], OC = w[0], Cg = w[1], kh = w[2], kw = w[3];
  const int64_t OH = out_size(H, kh, p.stride[0], p.padding[0], p.dilation[0]);
  const int64_t OW = out_size(W, kw, p.stride[1], p.padding[1], p.dilation[1]);
  const int64_t OCg = OC / p.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t cl = 0; cl < Cg; ++cl)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                int64_t ih = oh * p.stride[0] - p.padding[0] + ki * p.dilation[0];
                int64_t iw = ow * p.stride[1] - p.padding[1] + kj * p.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t c = (oc / OCg) * Cg + cl;
                f(((n * C + c) * H + ih) * W + iw, ((oc * Cg + cl) * kh + ki) * kw + kj,
                  ((n * OC + oc) * OH + oh) * OW + ow);
              }
}

Shape conv_out_shape(const Shape& x, const Shape& w, const Params& p) {
  return {x[0], w[0], out_size(x[2], w[2], p.stride[0], p.padding[0], p.dilation[0]),
          out_size(x[3], w[3], p.stride[1], p.padding[1], p.dilation[1])};
}

Ref conv_ref(const Ref& x, const Ref& w, const Ref* b, const Params& p) {
  Shape os = conv_out_shape(x.shape, w.shape, p);
  Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  for_each_tap(x.shape, w.shape, p,
               [&](int64_t xi, int64_t wi, int64_t oi) { out.v[oi] += x.v[xi] * w.v[wi]; });
  if (b) {
    const int64_t plane = os[2] * os[3];
    for (int64_t i = 0; i < out.numel(); ++i) out.v[i] += b->v[(i / plane) % os[1]];
  }
  return out;
}

OpCase conv_case(std::string label, Params p, bool bias, std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "conv2d";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    return F::conv2d(in[0], in[1], bias ? in[2] : Tensor(), p.stride, p.padding, p.dilation,
                     p.groups);
  };
  c.ref = [=](const std::vector<Ref>& r) {
    return conv_ref(r[0], r[1], bias ? &r[2] : nullptr, p);
  };
  c.f32_tol = 1e-4;
  return c;
}

ops::Conv2dGradAttrs grad_attrs(const Params& p, Shape size) {
  ops::Conv2dGradAttrs a;
  a.stride = p.stride, a.padding = p.padding, a.dilation = p.dilation, a.groups = p.groups,
  a.size = size;
  return a;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  out.push_back(conv_case("basic", {}, true,
                          {{{{1, 2, 5, 5}}, {{3, 2, 3, 3}}, {{3}}},
                           {{{2, 3, 6, 7}}, {{4, 3, 3, 3}}, {{4}}},
                           {{{2, 16, 24, 24}}, {{32, 16, 3, 3}}, {{32}}},
                           {{{1, 8, 40, 40}}, {{8, 8, 3, 3}}, {{8}}}}));
  out.push_back(conv_case(
      "stride_padding", {{2, 2}, {1, 1}}, true,
      {{{{1, 2, 6, 5}}, {{2, 2, 3, 3}}, {{2}}}, {{{3, 4, 17, 15}}, {{6, 4, 3, 3}}, {{6}}}}));
  out.push_back(conv_case("asymmetric", {{2, 1}, {1, 0}}, false,
                          {{{{1, 2, 6, 7}}, {{3, 2, 2, 3}}}, {{{2, 3, 20, 9}}, {{5, 3, 4, 2}}}}));
  out.push_back(conv_case("dilation", {{1, 1}, {2, 1}, {2, 2}}, false,
                          {{{{1, 2, 6, 6}}, {{2, 2, 3, 3}}}, {{{2, 3, 19, 21}}, {{4, 3, 3, 3}}}}));
  out.push_back(conv_case(
      "groups", {{1, 1}, {1, 1}, {1, 1}, 2}, true,
      {{{{1, 4, 4, 4}}, {{6, 2, 3, 3}}, {{6}}}, {{{2, 8, 12, 12}}, {{8, 4, 3, 3}}, {{8}}}}));
  out.push_back(conv_case("depthwise", {{1, 1}, {1, 1}, {1, 1}, 3}, false,
                          {{{{1, 3, 5, 5}}, {{3, 1, 3, 3}}}, {{{4, 3, 16, 16}}, {{3, 1, 3, 3}}}}));
  out.push_back(conv_case(
      "pointwise", {}, true,
      {{{{1, 3, 4, 4}}, {{2, 3, 1, 1}}, {{2}}}, {{{2, 32, 30, 30}}, {{16, 32, 1, 1}}, {{16}}}}));
  {
    // Unbatched [C, H, W] input.
    OpCase c = conv_case("unbatched", {}, true, {{{{2, 5, 5}}, {{3, 2, 3, 3}}, {{3}}}});
    c.ref = [](const std::vector<Ref>& r) {
      Ref x{Shape{1, r[0].shape[0], r[0].shape[1], r[0].shape[2]}, r[0].v};
      Ref y = conv_ref(x, r[1], &r[2], {});
      return Ref{Shape{y.shape[1], y.shape[2], y.shape[3]}, y.v};
    };
    out.push_back(c);
  }
  {
    // padding="same": kernel 2x3 needs (0 + 1 extra, 1 + 1) padding; the odd pad goes bottom/right.
    OpCase c = conv_case("same", {}, false,
                         {{{{1, 2, 5, 6}}, {{2, 2, 2, 3}}}, {{{2, 3, 9, 8}}, {{4, 3, 4, 3}}}});
    c.fn = [](const std::vector<Tensor>& in) {
      return F::conv2d(in[0], in[1], Tensor(), {1}, "same");
    };
    c.ref = [](const std::vector<Ref>& r) {
      const Shape& xs = r[0].shape;
      int64_t th = r[1].shape[2] - 1, tw = r[1].shape[3] - 1;
      // Pad explicitly (top th/2, bottom th - th/2, ...) then run a valid convolution.
      Shape ps{xs[0], xs[1], xs[2] + th, xs[3] + tw};
      Ref padded{ps, std::vector<double>(static_cast<size_t>(numel(ps)))};
      for (int64_t i = 0; i < r[0].numel(); ++i) {
        int64_t w = i % xs[3], h = (i / xs[3]) % xs[2], nc = i / (xs[2] * xs[3]);
        padded.v[(nc * ps[2] + h + th / 2) * ps[3] + w + tw / 2] = r[0].v[i];
      }
      return conv_ref(padded, r[1], nullptr, {});
    };
    out.push_back(c);
  }
  // ---- conv2d_input_grad / conv2d_weight_grad (called directly; references scatter the taps) ----
  struct GradRun {
    std::string label;
    Params p;
    Shape x, w;
  };
  std::vector<GradRun> grad_runs = {
      {"basic", {}, {1, 2, 5, 5}, {3, 2, 3, 3}},
      {"strided", {{2, 2}, {1, 1}, {1, 1}, 1}, {2, 2, 6, 5}, {2, 2, 3, 3}},
      {"groups_dilation", {{1, 2}, {2, 1}, {2, 1}, 2}, {1, 4, 5, 4}, {4, 2, 2, 3}},
      {"pointwise", {}, {2, 3, 4, 3}, {2, 3, 1, 1}},
      {"large", {{1, 1}, {1, 1}, {1, 1}, 1}, {2, 16, 20, 20}, {24, 16, 3, 3}},
  };
  for (const GradRun& g : grad_runs) {
    Shape os = conv_out_shape(g.x, g.w, g.p);
    OpCase in_grad;
    in_grad.op = "conv2d_input_grad";
    in_grad.label = g.label;
    in_grad.runs = {{{os}, {g.w}}};
    in_grad.fn = [g](const std::vector<Tensor>& in) {
      init();
      return dispatch1(ops::conv2d_input_grad, Tensors{in[0], in[1]}, grad_attrs(g.p, g.x));
    };
    in_grad.ref = [g](const std::vector<Ref>& r) {
      Ref gx{g.x, std::vector<double>(static_cast<size_t>(numel(g.x)))};
      for_each_tap(g.x, g.w, g.p, [&](int64_t xi, int64_t wi, int64_t oi) {
        gx.v[xi] += r[0].v[oi] * r[1].v[wi];
      });
      return gx;
    };
    in_grad.f32_tol = 1e-4;
    in_grad.gradcheck = g.label != "large";  // the large run checks the threaded values only
    out.push_back(in_grad);
    OpCase w_grad = in_grad;
    w_grad.op = "conv2d_weight_grad";
    w_grad.runs = {{{os}, {g.x}}};
    w_grad.fn = [g](const std::vector<Tensor>& in) {
      init();
      return dispatch1(ops::conv2d_weight_grad, Tensors{in[0], in[1]}, grad_attrs(g.p, g.w));
    };
    w_grad.ref = [g](const std::vector<Ref>& r) {
      Ref gw{g.w, std::vector<double>(static_cast<size_t>(numel(g.w)))};
      for_each_tap(g.x, g.w, g.p, [&](int64_t xi, int64_t wi, int64_t oi) {
        gw.v[wi] += r[0].v[oi] * r[1].v[xi];
      });
      return gw;
    };
    w_grad.f32_tol = 1e-4;
    out.push_back(w_grad);
  }
  return out;
}

Register conv_cases(cases());

}  // namespace
}  // namespace kiln::testing
