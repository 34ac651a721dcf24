// OpCases for the composites over 1 and 3 spatial dims and the transposed convolutions
// (src/tensor_ops/conv_nd.cpp, pool_nd.cpp), filed under the 2-D op each is built on, with
// references written for any number of spatial dims: the convolution sum tap by tap, the
// transposed one as its scatter, and box windows for the pools.
#include <cmath>
#include <limits>

#include "harness.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

struct Window {
  Shape stride, padding, dilation, output_padding;
  int64_t groups = 1;
};

// Visits every multi-index of `extent` in row-major order.
template <class Fn>
void for_each_index(const Shape& extent, Fn f) {
  Shape at(extent.size(), 0);
  for (int64_t v : extent)
    if (v == 0) return;
  for (;;) {
    f(at);
    size_t d = extent.size();
    while (d-- > 0 && ++at[d] == extent[d]) at[d] = 0;
    if (d == static_cast<size_t>(-1)) return;
  }
}

int64_t flat(const Shape& shape, IntList index) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + index[d];
  return f;
}

// a followed by b's entries.
Shape join(Shape a, const Shape& b) {
  for (int64_t v : b) a.push_back(v);
  return a;
}

Shape spatial_of(const Shape& s) {
  return Shape(std::vector<int64_t>(s.begin() + 2, s.end()));
}

// conv{1,3}d: out[n, oc, o] = sum w[oc, cl, k] x[n, g * Cg + cl, o * s - p + k * d] + b[oc].
Ref conv_ref(const Ref& x, const Ref& w, const Ref* b, const Window& p) {
  const size_t dims = x.shape.size() - 2;
  const int64_t N = x.shape[0], OC = w.shape[0], Cg = w.shape[1], OCg = OC / p.groups;
  Shape out_sp;
  for (size_t d = 0; d < dims; ++d)
    out_sp.push_back((x.shape[2 + d] + 2 * p.padding[d] - p.dilation[d] * (w.shape[2 + d] - 1) - 1) /
                         p.stride[d] + 1);
  Shape os{N, OC};
  os = join(os, out_sp);
  Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  Shape kernel = spatial_of(w.shape);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for_each_index(out_sp, [&](const Shape& o) {
        double acc = b ? b->v[static_cast<size_t>(oc)] : 0.0;
        for (int64_t cl = 0; cl < Cg; ++cl)
          for_each_index(kernel, [&](const Shape& k) {
            Shape xi{n, (oc / OCg) * Cg + cl};
            for (size_t d = 0; d < dims; ++d) {
              int64_t i = o[d] * p.stride[d] - p.padding[d] + k[d] * p.dilation[d];
              if (i < 0 || i >= x.shape[2 + d]) return;
              xi.push_back(i);
            }
            Shape wi{oc, cl};
            wi = join(wi, k);
            acc += ref_at(x, xi) * ref_at(w, wi);
          });
        Shape oi{n, oc};
        oi = join(oi, o);
        out.v[static_cast<size_t>(flat(os, oi))] = acc;
      });
  return out;
}

// conv_transpose: every x[n, c, i] * w[c, ocl, k] lands at out[n, g * OCg + ocl, i s - p + k d].
Ref conv_transpose_ref(const Ref& x, const Ref& w, const Ref* b, const Window& p) {
  const size_t dims = x.shape.size() - 2;
  const int64_t N = x.shape[0], C = x.shape[1], OCg = w.shape[1], Cg = C / p.groups;
  Shape os{N, OCg * p.groups};
  for (size_t d = 0; d < dims; ++d)
    os.push_back((x.shape[2 + d] - 1) * p.stride[d] - 2 * p.padding[d] +
                 p.dilation[d] * (w.shape[2 + d] - 1) + p.output_padding[d] + 1);
  Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  if (b)
    for (int64_t i = 0; i < out.numel(); ++i)
      out.v[static_cast<size_t>(i)] = b->v[static_cast<size_t>((i / numel(spatial_of(os))) % os[1])];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for_each_index(spatial_of(x.shape), [&](const Shape& i) {
        for (int64_t ocl = 0; ocl < OCg; ++ocl)
          for_each_index(spatial_of(w.shape), [&](const Shape& k) {
            Shape oi{n, (c / Cg) * OCg + ocl};
            for (size_t d = 0; d < dims; ++d) {
              int64_t o = i[d] * p.stride[d] - p.padding[d] + k[d] * p.dilation[d];
              if (o < 0 || o >= os[2 + d]) return;
              oi.push_back(o);
            }
            Shape xi{n, c}, wi{c, ocl};
            xi = join(xi, i);
            wi = join(wi, k);
            out.v[static_cast<size_t>(flat(os, oi))] += ref_at(x, xi) * ref_at(w, wi);
          });
      });
  return out;
}

// Box pools over the spatial dims (floor mode). kind 'm': max (padding never wins); 'a':
// average with PyTorch's divisor (the window clipped to the padded input, or to the input).
Ref pool_ref(const Ref& x, const Shape& kernel, const Window& p, char kind, bool count_include_pad) {
  const size_t dims = kernel.size();
  Shape out_sp;
  for (size_t d = 0; d < dims; ++d)
    out_sp.push_back((x.shape[2 + d] + 2 * p.padding[d] - p.dilation[d] * (kernel[d] - 1) - 1) /
                         p.stride[d] + 1);
  Shape os{x.shape[0], x.shape[1]};
  os = join(os, out_sp);
  Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t c = 0; c < x.shape[1]; ++c)
      for_each_index(out_sp, [&](const Shape& o) {
        double acc = kind == 'm' ? -std::numeric_limits<double>::infinity() : 0.0;
        double divisor = 1;
        for (size_t d = 0; d < dims; ++d) {
          int64_t start = o[d] * p.stride[d] - p.padding[d];
          int64_t end = std::min(start + kernel[d], x.shape[2 + d] + p.padding[d]);
          if (!count_include_pad) start = std::max<int64_t>(start, 0), end = std::min(end, x.shape[2 + d]);
          divisor *= static_cast<double>(end - start);
        }
        for_each_index(kernel, [&](const Shape& k) {
          Shape xi{n, c};
          for (size_t d = 0; d < dims; ++d) {
            int64_t i = o[d] * p.stride[d] - p.padding[d] + k[d] * p.dilation[d];
            if (i < 0 || i >= x.shape[2 + d]) return;
            xi.push_back(i);
          }
          double v = ref_at(x, xi);
          acc = kind == 'm' ? std::max(acc, v) : acc + v;
        });
        Shape oi{n, c};
        oi = join(oi, o);
        out.v[static_cast<size_t>(flat(os, oi))] = kind == 'm' ? acc : acc / divisor;
      });
  return out;
}

Window window(size_t dims, IntList stride, IntList padding, IntList dilation, int64_t groups = 1,
              IntList output_padding = {}) {
  auto full = [&](IntList v, int64_t fallback) {
    if (v.empty()) return Shape(std::vector<int64_t>(dims, fallback));
    return v.size() == 1 ? Shape(std::vector<int64_t>(dims, v[0])) : Shape(v);
  };
  return {full(stride, 1), full(padding, 0), full(dilation, 1), full(output_padding, 0), groups};
}

OpCase conv_nd_case(std::string label, size_t dims, Window p, bool bias,
                    std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "conv2d";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    Tensor b = bias ? in[2] : Tensor();
    return dims == 1 ? F::conv1d(in[0], in[1], b, p.stride, p.padding, p.dilation, p.groups)
                     : F::conv3d(in[0], in[1], b, p.stride, p.padding, p.dilation, p.groups);
  };
  c.ref = [=](const std::vector<Ref>& r) { return conv_ref(r[0], r[1], bias ? &r[2] : nullptr, p); };
  c.f32_tol = 1e-4;
  return c;
}

OpCase conv_transpose_case(std::string label, size_t dims, Window p, bool bias,
                           std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "conv2d_input_grad";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    Tensor b = bias ? in[2] : Tensor();
    auto f = dims == 1 ? F::conv_transpose1d : dims == 2 ? F::conv_transpose2d : F::conv_transpose3d;
    return f(in[0], in[1], b, p.stride, p.padding, p.output_padding, p.groups, p.dilation);
  };
  c.ref = [=](const std::vector<Ref>& r) {
    return conv_transpose_ref(r[0], r[1], bias ? &r[2] : nullptr, p);
  };
  c.f32_tol = 1e-4;
  return c;
}

OpCase pool_case(std::string label, Shape kernel, Window p, char kind, bool count_include_pad,
                 std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = kind == 'm' ? "max_pool2d" : "avg_pool2d";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) {
    if (kind == 'm')
      return kernel.size() == 1 ? F::max_pool1d(in[0], kernel, p.stride, p.padding, p.dilation)
                                : F::max_pool3d(in[0], kernel, p.stride, p.padding, p.dilation);
    return kernel.size() == 1
               ? F::avg_pool1d(in[0], kernel, p.stride, p.padding, false, count_include_pad)
               : F::avg_pool3d(in[0], kernel, p.stride, p.padding, false, count_include_pad);
  };
  c.ref = [=](const std::vector<Ref>& r) { return pool_ref(r[0], kernel, p, kind, count_include_pad); };
  return c;
}

Register conv_nd_cases({
    conv_nd_case("conv1d", 1, window(1, {2}, {1}, {1}), true,
                 {{{{2, 3, 9}}, {{4, 3, 3}}, {{4}}}, {{{1, 4, 20}}, {{6, 4, 5}}, {{6}}}}),
    conv_nd_case("conv1d_groups_dilation", 1, window(1, {1}, {2}, {2}, 2), false,
                 {{{{2, 4, 11}}, {{6, 2, 3}}}}),
    conv_nd_case("conv3d", 3, window(3, {2, 1, 1}, {1, 0, 1}, {1, 2, 1}), true,
                 {{{{2, 2, 5, 6, 5}}, {{3, 2, 3, 2, 2}}, {{3}}}, {{{1, 2, 3, 3, 2}}, {{3, 2, 3, 2, 2}}, {{3}}}}),
    conv_nd_case("conv3d_groups", 3, window(3, {1}, {1}, {1}, 2), false,
                 {{{{1, 4, 3, 4, 4}}, {{6, 2, 2, 2, 2}}}, {{{1, 4, 2, 3, 3}}, {{6, 2, 2, 2, 2}}}}),
    conv_transpose_case("conv_transpose1d", 1, window(1, {2}, {1}, {1}, 1, {1}), true,
                        {{{{2, 3, 5}}, {{3, 4, 3}}, {{4}}}}),
    conv_transpose_case("conv_transpose2d_groups", 2, window(2, {2, 3}, {1, 0}, {1}, 2, {1, 2}), true,
                        {{{{2, 4, 4, 3}}, {{4, 3, 3, 2}}, {{6}}}}),
    conv_transpose_case("conv_transpose2d_dilation", 2, window(2, {2}, {2}, {2}), false,
                        {{{{1, 3, 4, 4}}, {{3, 2, 3, 3}}}}),
    conv_transpose_case("conv_transpose3d", 3, window(3, {2, 1, 2}, {0, 1, 1}, {2, 1, 1}, 2, {1, 0, 1}),
                        true, {{{{1, 4, 3, 4, 3}}, {{4, 1, 2, 3, 2}}, {{2}}}}),
    conv_transpose_case("conv_transpose3d_plain", 3, window(3, {1}, {0}, {1}), false,
                        {{{{2, 2, 2, 3, 3}}, {{2, 3, 2, 2, 2}}}}),
    pool_case("max_pool1d", {3}, window(1, {2}, {1}, {1}), 'm', true, {{{{2, 3, 9}}}}),
    pool_case("max_pool3d", {2, 3, 2}, window(3, {2, 2, 1}, {1, 1, 0}, {1, 1, 2}), 'm', true,
              {{{{2, 2, 5, 6, 5}}}, {{{1, 2, 3, 4, 5}}}}),
    pool_case("avg_pool1d", {3}, window(1, {2}, {1}, {1}), 'a', false, {{{{2, 3, 9}}}}),
    pool_case("avg_pool3d_include_pad", {2, 3, 3}, window(3, {1, 2, 2}, {1}, {1}), 'a', true,
              {{{{1, 2, 4, 5, 5}}}}),
    pool_case("avg_pool3d_exclude_pad", {3, 3, 3}, window(3, {2}, {1}, {1}), 'a', false,
              {{{{1, 2, 6, 5, 7}}}, {{{1, 1, 3, 4, 5}}}}),
});

}  // namespace
}  // namespace kiln::testing
