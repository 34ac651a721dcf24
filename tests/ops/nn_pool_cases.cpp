// OpCases for max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward ops, with
// plain-loop references that enumerate each window's taps.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "harness.h"
#include "kiln/ops/pool.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

struct Window {
  Shape kernel, stride, padding, dilation{1, 1};
  bool ceil_mode = false;
};

int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside
  return out;
}

Shape pooled_shape(const Shape& x, const Window& w) {
  return {x[0], x[1],
          pooled(x[2], w.kernel[0], w.stride[0], w.padding[0], w.dilation[0], w.ceil_mode),
          pooled(x[3], w.kernel[1], w.stride[1], w.padding[1], w.dilation[1], w.ceil_mode)};
}

// Max pooling reference: value and flat argmax (first maximum wins).
void max_ref(const Ref& x, const Window& w, Ref* values, std::vector<int64_t>* argmax) {
  Shape os = pooled_shape(x.shape, w);
  const int64_t H = x.shape[2], W = x.shape[3];
  *values = Ref{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  argmax->assign(static_cast<size_t>(numel(os)), -1);
  for (int64_t i = 0; i < numel(os); ++i) {
    int64_t ow = i % os[3], oh = (i / os[3]) % os[2], plane = i / (os[2] * os[3]);
    double best = -INFINITY;
    for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
        int64_t ih = oh * w.stride[0] - w.padding[0] + ki * w.dilation[0];
        int64_t iw = ow * w.stride[1] - w.padding[1] + kj * w.dilation[1];
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        double v = x.v[(plane * H + ih) * W + iw];
        if (v > best) {
          best = v;
          (*argmax)[i] = ih * W + iw;
        }
      }
    values->v[i] = best;
  }
}

OpCase max_case(std::string label, Window w, std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "max_pool2d";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    return F::max_pool2d(in[0], w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
  };
  c.ref = [=](const std::vector<Ref>& r) {
    Ref v;
    std::vector<int64_t> idx;
    max_ref(r[0], w, &v, &idx);
    return v;
  };
  return c;
}

// max_pool2d's argmax indices against max_ref's.
OpCase indices_case(std::string label, Window w, std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "max_pool2d";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    return F::max_pool2d_with_indices(in[0], w.kernel, w.stride, w.padding).second;
  };
  c.ref = [=](const std::vector<Ref>& r) {
    Ref v;
    std::vector<int64_t> idx;
    max_ref(r[0], w, &v, &idx);
    return Ref{v.shape, std::vector<double>(idx.begin(), idx.end())};
  };
  c.gradcheck = false;
  c.output_dtype = kInt64;
  return c;
}

struct AvgOptions {
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

// Calls f(out_offset, in_offset, divisor) for every tap of every average window.
template <class Fn>
void for_each_avg_tap(const Shape& x, const Window& w, const AvgOptions& o, Fn f) {
  Shape os = pooled_shape(x, w);
  const int64_t H = x[2], W = x[3];
  for (int64_t i = 0; i < numel(os); ++i) {
    int64_t ow = i % os[3], oh = (i / os[3]) % os[2], plane = i / (os[2] * os[3]);
    int64_t h0 = oh * w.stride[0] - w.padding[0], w0 = ow * w.stride[1] - w.padding[1];
    // Taps inside the padded input count for count_include_pad; taps past it never do.
    int64_t inside = 0, padded = 0;
    for (int64_t h = h0; h < h0 + w.kernel[0]; ++h)
      for (int64_t ww = w0; ww < w0 + w.kernel[1]; ++ww) {
        if (h < H + w.padding[0] && ww < W + w.padding[1]) ++padded;
        if (h >= 0 && h < H && ww >= 0 && ww < W) ++inside;
      }
    double div = o.divisor_override ? static_cast<double>(*o.divisor_override)
                                    : static_cast<double>(o.count_include_pad ? padded : inside);
    for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h0 + w.kernel[0], H); ++h)
      for (int64_t ww = std::max<int64_t>(w0, 0); ww < std::min(w0 + w.kernel[1], W); ++ww)
        f(i, (plane * H + h) * W + ww, div);
  }
}

OpCase avg_case(std::string label, Window w, AvgOptions o, std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "avg_pool2d";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    return F::avg_pool2d(in[0], w.kernel, w.stride, w.padding, w.ceil_mode, o.count_include_pad,
                         o.divisor_override);
  };
  c.ref = [=](const std::vector<Ref>& r) {
    Shape os = pooled_shape(r[0].shape, w);
    Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
    for_each_avg_tap(r[0].shape, w, o,
                     [&](int64_t oi, int64_t xi, double div) { out.v[oi] += r[0].v[xi] / div; });
    return out;
  };
  return c;
}

// Calls f(out_offset, in_offset, window_size) for every tap of every adaptive window.
template <class Fn>
void for_each_adaptive_tap(const Shape& x, const Shape& os, Fn f) {
  for (int64_t i = 0; i < numel(os); ++i) {
    int64_t ow = i % os[3], oh = (i / os[3]) % os[2], plane = i / (os[2] * os[3]);
    int64_t h0 = static_cast<int64_t>(std::floor(static_cast<double>(oh * x[2]) / os[2]));
    int64_t h1 = static_cast<int64_t>(std::ceil(static_cast<double>((oh + 1) * x[2]) / os[2]));
    int64_t w0 = static_cast<int64_t>(std::floor(static_cast<double>(ow * x[3]) / os[3]));
    int64_t w1 = static_cast<int64_t>(std::ceil(static_cast<double>((ow + 1) * x[3]) / os[3]));
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w)
        f(i, (plane * x[2] + h) * x[3] + w, static_cast<double>((h1 - h0) * (w1 - w0)));
  }
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // ---- max_pool2d ----
  out.push_back(max_case("k2", {{2, 2}, {2, 2}, {0, 0}}, {{{{1, 3, 6, 6}}}, {{{4, 16, 32, 32}}}}));
  out.push_back(
      max_case("k3_s2_p1", {{3, 3}, {2, 2}, {1, 1}}, {{{{1, 2, 7, 6}}}, {{{2, 8, 33, 31}}}}));
  out.push_back(max_case("dilation", {{2, 3}, {1, 2}, {1, 1}, {2, 2}}, {{{{1, 2, 7, 8}}}}));
  out.push_back(max_case("ceil_mode", {{3, 3}, {2, 2}, {1, 0}, {1, 1}, true},
                         {{{{1, 2, 6, 8}}}, {{{2, 3, 10, 9}}}}));
  {
    // Unbatched input, stride defaulting to the kernel size.
    OpCase c = max_case("unbatched_default_stride", {{2, 2}, {2, 2}, {0, 0}}, {{{{3, 4, 6}}}});
    c.fn = [](const std::vector<Tensor>& in) { return F::max_pool2d(in[0], {2}); };
    c.ref = [](const std::vector<Ref>& r) {
      Ref v;
      std::vector<int64_t> idx;
      max_ref(Ref{Shape{1, 3, 4, 6}, r[0].v}, {{2, 2}, {2, 2}, {0, 0}}, &v, &idx);
      return Ref{Shape{3, 2, 3}, v.v};
    };
    out.push_back(c);
  }
  // The argmax indices (int64, flat within each plane).
  out.push_back(indices_case("indices", {{3, 2}, {2, 1}, {1, 1}}, {{{{2, 3, 7, 5}}}}));
  // Windows that tile the input take their own row loops (2x2 in AVX-512 where the CPU has
  // it): rows shorter than a vector, rows of several vectors with a tail, odd sizes whose
  // last row and column no window reads, ties between integer inputs (first maximum wins).
  for (auto [label, kernel, runs] :
       std::vector<std::tuple<std::string, int64_t, std::vector<std::vector<Input>>>>{
           {"tiled_2x2",
            2,
            {{{{1, 2, 4, 6}}}, {{{2, 3, 7, 9}}}, {{{1, 2, 6, 70}}}, {{{2, 4, 8, 34}, Gen::Int}}}},
           {"tiled_3x3", 3, {{{{1, 2, 9, 10}}}, {{{2, 3, 6, 13}, Gen::Int}}}}}) {
    Window w{{kernel, kernel}, {kernel, kernel}, {0, 0}};
    out.push_back(indices_case("indices_" + label, w, runs));
    // Values (and gradients) from the uniform runs: ties have no derivative.
    std::erase_if(runs, [](const std::vector<Input>& run) { return run[0].gen == Gen::Int; });
    out.push_back(max_case(label, w, runs));
  }
  {
    // max_pool2d_backward(grad, indices): indices come from pooling the second input.
    Window w{{2, 3}, {2, 2}, {1, 1}};
    OpCase c;
    c.op = "max_pool2d_backward";
    c.label = "scatter";
    c.runs = {{{{1, 2, 4, 4}}, Input{{1, 2, 6, 7}, Gen::Uniform, std::nullopt, 0, false}},
              {{{2, 8, 17, 16}}, Input{{2, 8, 32, 32}, Gen::Uniform, std::nullopt, 0, false}}};
    c.fn = [=](const std::vector<Tensor>& in) {
      Tensor indices =
          F::max_pool2d_with_indices(in[1].detach(), w.kernel, w.stride, w.padding).second;
      ops::PoolBackwardSizeAttrs a;
      a.input_size = {in[1].size(2), in[1].size(3)};
      return dispatch1(ops::max_pool2d_backward, Tensors{in[0], indices}, a);
    };
    c.ref = [=](const std::vector<Ref>& r) {
      Ref v;
      std::vector<int64_t> idx;
      max_ref(r[1], w, &v, &idx);
      Ref gx{r[1].shape, std::vector<double>(r[1].v.size())};
      const int64_t plane_out = v.shape[2] * v.shape[3], plane_in = r[1].shape[2] * r[1].shape[3];
      for (int64_t i = 0; i < v.numel(); ++i)
        gx.v[(i / plane_out) * plane_in + idx[i]] += r[0].v[i];
      return gx;
    };
    out.push_back(c);
  }
  // ---- avg_pool2d ----
  out.push_back(
      avg_case("k2", {{2, 2}, {2, 2}, {0, 0}}, {}, {{{{1, 3, 6, 6}}}, {{{4, 16, 32, 32}}}}));
  out.push_back(avg_case("pad_included", {{3, 3}, {2, 2}, {1, 1}}, {},
                         {{{{1, 2, 7, 6}}}, {{{2, 8, 33, 31}}}}));
  out.push_back(avg_case("pad_excluded", {{3, 3}, {2, 2}, {1, 1}}, {false, std::nullopt},
                         {{{{1, 2, 7, 6}}}}));
  out.push_back(avg_case("ceil_mode", {{3, 2}, {2, 2}, {1, 1}, {1, 1}, true}, {},
                         {{{{1, 2, 6, 7}}}, {{{2, 3, 9, 10}}}}));
  out.push_back(avg_case("ceil_mode_pad_excluded", {{3, 2}, {2, 2}, {1, 1}, {1, 1}, true},
                         {false, std::nullopt}, {{{{1, 2, 6, 7}}}}));
  out.push_back(
      avg_case("divisor_override", {{2, 2}, {1, 1}, {0, 0}}, {true, 3}, {{{{1, 2, 4, 5}}}}));
  {
    AvgOptions o{false, std::nullopt};
    Window w{{3, 2}, {2, 1}, {1, 1}, {1, 1}, true};
    OpCase c;
    c.op = "avg_pool2d_backward";
    c.label = "ceil_pad_excluded";
    Shape x{2, 2, 7, 5};
    Shape os = pooled_shape(x, w);
    c.runs = {{{os}}};
    c.fn = [=](const std::vector<Tensor>& in) {
      ops::AvgPool2dBackwardAttrs a;
      a.pool.kernel_size = w.kernel, a.pool.stride = w.stride, a.pool.padding = w.padding;
      a.pool.ceil_mode = true, a.pool.count_include_pad = false;
      a.input_size = {x[2], x[3]};
      init();
      return dispatch1(ops::avg_pool2d_backward, Tensors{in[0]}, a);
    };
    c.ref = [=](const std::vector<Ref>& r) {
      Ref gx{x, std::vector<double>(static_cast<size_t>(numel(x)))};
      for_each_avg_tap(x, w, o,
                       [&](int64_t oi, int64_t xi, double div) { gx.v[xi] += r[0].v[oi] / div; });
      return gx;
    };
    out.push_back(c);
  }
  // ---- adaptive_avg_pool2d ----
  struct Adaptive {
    std::string label;
    Shape x, out;
  };
  for (const Adaptive& a : std::vector<Adaptive>{{"down", {1, 3, 7, 5}, {3, 2}},
                                                 {"identity", {1, 2, 4, 4}, {4, 4}},
                                                 {"global", {2, 2, 5, 7}, {1, 1}},
                                                 {"up", {1, 2, 3, 3}, {5, 4}},
                                                 {"large", {4, 16, 33, 29}, {7, 7}}}) {
    OpCase c;
    c.op = "adaptive_avg_pool2d";
    c.label = a.label;
    c.runs = {{{a.x}}};
    Shape os{a.x[0], a.x[1], a.out[0], a.out[1]};
    c.fn = [=](const std::vector<Tensor>& in) {
      return F::adaptive_avg_pool2d(in[0], {os[2], os[3]});
    };
    c.ref = [=](const std::vector<Ref>& r) {
      Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
      for_each_adaptive_tap(r[0].shape, os,
                            [&](int64_t oi, int64_t xi, double n) { out.v[oi] += r[0].v[xi] / n; });
      return out;
    };
    c.gradcheck = a.label != "large";
    out.push_back(c);
    OpCase b;
    b.op = "adaptive_avg_pool2d_backward";
    b.label = a.label;
    b.runs = {{{os}}};
    b.fn = [=](const std::vector<Tensor>& in) {
      ops::PoolBackwardSizeAttrs attrs;
      attrs.input_size = {a.x[2], a.x[3]};
      init();
      return dispatch1(ops::adaptive_avg_pool2d_backward, Tensors{in[0]}, attrs);
    };
    b.ref = [=](const std::vector<Ref>& r) {
      Ref gx{a.x, std::vector<double>(static_cast<size_t>(numel(a.x)))};
      for_each_adaptive_tap(a.x, os,
                            [&](int64_t oi, int64_t xi, double n) { gx.v[xi] += r[0].v[oi] / n; });
      return gx;
    };
    b.gradcheck = a.label != "large";
    out.push_back(b);
  }
  {
    // -1 keeps that dim (PyTorch's None).
    OpCase c;
    c.op = "adaptive_avg_pool2d";
    c.label = "keep_dim";
    c.runs = {{{{1, 2, 6, 5}}}};
    c.fn = [](const std::vector<Tensor>& in) { return F::adaptive_avg_pool2d(in[0], {4, -1}); };
    c.ref = [](const std::vector<Ref>& r) {
      Shape os{1, 2, 4, 5};
      Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
      for_each_adaptive_tap(r[0].shape, os,
                            [&](int64_t oi, int64_t xi, double n) { out.v[oi] += r[0].v[xi] / n; });
      return out;
    };
    out.push_back(c);
  }
  return out;
}

Register pool_cases(cases());

}  // namespace
}  // namespace kiln::testing
