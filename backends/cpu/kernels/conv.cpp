// CPU kernels for conv2d and its two gradient ops. Algorithm: im2col + GEMM (OpenBLAS,
// single-threaded inside kiln's pool). The forward and the weight gradient cut the work
// into (image, output-column block) tasks, so a batch of one still uses every core; the
// input gradient cuts it into (image, group, input-channel block) tasks, whose col2im
// writes touch disjoint channel planes. 1x1 convolutions with stride 1 and no padding use
// the input plane as the im2col matrix directly.
#include "kiln/ops/conv.h"

#include <algorithm>
#include <cstring>

#include "kernels.h"
#include "kiln/cpu/gemm/conv2d.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct ConvGeom {
  int64_t N, C, H, W, OC, G, Cg, OCg, kh, kw, OH, OW, sh, sw, ph, pw, dh, dw;
  int64_t K, P;    // im2col rows (Cg * kh * kw) and columns (OH * OW)
  bool pointwise;  // 1x1, stride 1, no padding

  ConvGeom(IntList x, IntList w, const Shape& stride, const Shape& pad, const Shape& dil,
           int64_t groups)
      : N(x[0]),
        C(x[1]),
        H(x[2]),
        W(x[3]),
        OC(w[0]),
        G(groups),
        Cg(w[1]),
        OCg(w[0] / groups),
        kh(w[2]),
        kw(w[3]),
        OH(ops::conv_output_size(x[2], w[2], stride[0], pad[0], dil[0])),
        OW(ops::conv_output_size(x[3], w[3], stride[1], pad[1], dil[1])),
        sh(stride[0]),
        sw(stride[1]),
        ph(pad[0]),
        pw(pad[1]),
        dh(dil[0]),
        dw(dil[1]),
        K(w[1] * w[2] * w[3]),
        P(OH * OW) {
    pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  }

  // Output-column blocks per image: enough (image, block) tasks for every thread.
  int64_t column_blocks() const {
    int64_t want = ceil_div(2 * num_threads(), std::max<int64_t>(N, 1));
    return std::clamp<int64_t>(want, 1, std::max<int64_t>(1, P / 128));
  }
  int64_t flops() const { return N * OC * K * P; }
};

// The input columns [ow0, ow1) of output row `oh` that kernel tap (ki, kj) reads inside the
// plane are [lo, hi); the rest read padding.
struct TapRange {
  int64_t ih, off, lo, hi;
};
TapRange tap_range(const ConvGeom& g, int64_t oh, int64_t ki, int64_t kj, int64_t ow0,
                   int64_t ow1) {
  TapRange r;
  r.ih = oh * g.sh - g.ph + ki * g.dh;
  r.off = kj * g.dw - g.pw;  // iw = ow * sw + off
  int64_t lo = r.off >= 0 ? 0 : ceil_div(-r.off, g.sw);
  int64_t hi = g.W - r.off <= 0 ? 0 : ceil_div(g.W - r.off, g.sw);
  if (r.ih < 0 || r.ih >= g.H) lo = hi = ow0;
  r.lo = std::clamp(lo, ow0, ow1);
  r.hi = std::clamp(hi, r.lo, ow1);
  return r;
}

// col[(c, ki, kj), p - p0] = x[c, ih, iw] (0 in the padding) for output columns p in [p0, p1).
template <class T>
void im2col(const T* x, const ConvGeom& g, int64_t channels, int64_t p0, int64_t p1, T* col) {
  const int64_t width = p1 - p0;
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = x + c * g.H * g.W;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        T* dst = col + ((c * g.kh + ki) * g.kw + kj) * width - p0;
        for (int64_t p = p0; p < p1;) {
          const int64_t oh = p / g.OW, ow0 = p % g.OW, ow1 = std::min(g.OW, ow0 + (p1 - p));
          const TapRange r = tap_range(g, oh, ki, kj, ow0, ow1);
          T* d = dst + oh * g.OW;
          for (int64_t ow = ow0; ow < r.lo; ++ow) d[ow] = T(0);
          const T* src = plane + r.ih * g.W + r.off;
          if (g.sw == 1) {
            if (r.hi > r.lo)
              std::memcpy(d + r.lo, src + r.lo, static_cast<size_t>(r.hi - r.lo) * sizeof(T));
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] = src[ow * g.sw];
          }
          for (int64_t ow = r.hi; ow < ow1; ++ow) d[ow] = T(0);
          p += ow1 - ow0;
        }
      }
    }
  }
}

// The adjoint of im2col over all columns: x[c, ih, iw] += col[(c, ki, kj), p].
template <class T>
void col2im(const T* col, const ConvGeom& g, int64_t channels, T* x) {
  for (int64_t c = 0; c < channels; ++c) {
    T* plane = x + c * g.H * g.W;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const T* src = col + ((c * g.kh + ki) * g.kw + kj) * g.P;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const TapRange r = tap_range(g, oh, ki, kj, 0, g.OW);
          T* dst = plane + r.ih * g.W + r.off;
          const T* s = src + oh * g.OW;
          for (int64_t ow = r.lo; ow < r.hi; ++ow) dst[ow * g.sw] += s[ow];
        }
      }
    }
  }
}

template <class T>
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                    const ConvGeom& g) {
  const T* xp = nn::cdata<T>(x);
  const T* wp = nn::cdata<T>(w);
  const std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  T* op = nn::mdata<T>(out);
  const int64_t blocks = g.column_blocks(), bs = ceil_div(g.P, blocks);
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(g.OC * g.K * bs, 1));
  parallel_for(0, g.N * blocks, grain, [&](int64_t lo, int64_t hi) {
    Tensor col = g.pointwise ? Tensor() : Tensor::empty({g.K * bs}, x.dtype());
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / blocks, p0 = (t % blocks) * bs, p1 = std::min(g.P, p0 + bs);
      if (p0 >= p1) continue;
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* img = xp + (n * g.C + grp * g.Cg) * g.H * g.W;
        const T* B = img + p0;
        int64_t ldb = g.P;
        if (!g.pointwise) {
          im2col(img, g, g.Cg, p0, p1, nn::mdata<T>(col));
          B = nn::cdata<T>(col);
          ldb = p1 - p0;
        }
        nn::gemm<T>(false, false, g.OCg, p1 - p0, g.K, wp + grp * g.OCg * g.K, g.K, B, ldb, T(0),
                    op + (n * g.OC + grp * g.OCg) * g.P + p0, g.P);
      }
      if (!b.empty()) {
        for (int64_t oc = 0; oc < g.OC; ++oc) {
          T* row = op + (n * g.OC + oc) * g.P;
          const T bv = static_cast<T>(b[oc]);
          for (int64_t p = p0; p < p1; ++p) row[p] += bv;
        }
      }
    }
  });
}

template <class T>
void conv2d_input_grad(const Tensor& grad, const Tensor& w, const Tensor& gx, const ConvGeom& g) {
  const T* gp = nn::cdata<T>(grad);
  const T* wp = nn::cdata<T>(w);
  T* xp = nn::mdata<T>(gx);
  if (!g.pointwise) std::memset(xp, 0, gx.nbytes());
  const int64_t kk = g.kh * g.kw;
  const int64_t cblocks = std::clamp<int64_t>(
      ceil_div(2 * num_threads(), std::max<int64_t>(g.N * g.G, 1)), 1, std::max<int64_t>(g.Cg, 1));
  const int64_t cbs = ceil_div(g.Cg, cblocks);
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(g.OCg * cbs * kk * g.P, 1));
  parallel_for(0, g.N * g.G * cblocks, grain, [&](int64_t lo, int64_t hi) {
    Tensor col = g.pointwise ? Tensor() : Tensor::empty({cbs * kk * g.P}, grad.dtype());
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / (g.G * cblocks), grp = (t / cblocks) % g.G, cb = t % cblocks;
      const int64_t c0 = cb * cbs, c1 = std::min(g.Cg, c0 + cbs);
      if (c0 >= c1) continue;
      const T* A = wp + grp * g.OCg * g.K + c0 * kk;  // W_g[:, c0*kk:c1*kk], transposed below
      const T* B = gp + (n * g.OC + grp * g.OCg) * g.P;
      T* dst = xp + (n * g.C + grp * g.Cg + c0) * g.H * g.W;
      if (g.pointwise) {
        nn::gemm<T>(true, false, (c1 - c0) * kk, g.P, g.OCg, A, g.K, B, g.P, T(0), dst, g.P);
      } else {
        T* cp = nn::mdata<T>(col);
        nn::gemm<T>(true, false, (c1 - c0) * kk, g.P, g.OCg, A, g.K, B, g.P, T(0), cp, g.P);
        col2im(cp, g, c1 - c0, dst);
      }
    }
  });
}

template <class T>
void conv2d_weight_grad(const Tensor& grad, const Tensor& x, const Tensor& gw, const ConvGeom& g) {
  const T* gp = nn::cdata<T>(grad);
  const T* xp = nn::cdata<T>(x);
  T* wp = nn::mdata<T>(gw);
  const int64_t blocks = g.column_blocks(), bs = ceil_div(g.P, blocks), tasks = g.N * blocks;
  const int64_t size = g.OC * g.K;
  // Each chunk sums its tasks into its own buffer (chunk 0 into gw); the buffers are added at the
  // end.
  const int64_t chunks =
      g.flops() < (int64_t{1} << 18) ? std::min<int64_t>(1, tasks) : nn::chunk_count(tasks, 1);
  Tensor partial = chunks > 1 ? Tensor::empty({(chunks - 1) * size}, grad.dtype()) : Tensor();
  std::memset(wp, 0, gw.nbytes());
  nn::run_chunks(tasks, chunks, [&](int64_t ch, int64_t lo, int64_t hi) {
    T* acc = ch == 0 ? wp : nn::mdata<T>(partial) + (ch - 1) * size;
    if (ch > 0) std::memset(acc, 0, static_cast<size_t>(size) * sizeof(T));
    Tensor col = g.pointwise ? Tensor() : Tensor::empty({g.K * bs}, grad.dtype());
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / blocks, p0 = (t % blocks) * bs, p1 = std::min(g.P, p0 + bs);
      if (p0 >= p1) continue;
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* img = xp + (n * g.C + grp * g.Cg) * g.H * g.W;
        const T* B = img + p0;
        int64_t ldb = g.P;
        if (!g.pointwise) {
          im2col(img, g, g.Cg, p0, p1, nn::mdata<T>(col));
          B = nn::cdata<T>(col);
          ldb = p1 - p0;
        }
        nn::gemm<T>(false, true, g.OCg, g.K, p1 - p0, gp + (n * g.OC + grp * g.OCg) * g.P + p0, g.P,
                    B, ldb, T(1), acc + grp * g.OCg * g.K, g.K);
      }
    }
  });
  for (int64_t ch = 1; ch < chunks; ++ch) {
    const T* src = nn::cdata<T>(partial) + (ch - 1) * size;
    for (int64_t i = 0; i < size; ++i) wp[i] += src[i];
  }
}

void conv2d_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::Conv2dAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]), w = nn::dense(c.inputs[1]);
  ConvGeom g(x.sizes(), w.sizes(), a.stride, a.padding, a.dilation, a.groups);
  if (x.dtype() == kFloat32 && gemm::has_direct_conv() && !g.pointwise) {
    const Tensor bias = c.inputs[2].defined() ? nn::dense(c.inputs[2]) : Tensor();
    gemm::PackedConvWeights packed(nn::cdata<float>(w), g.OC, g.G, g.Cg, g.kh, g.kw);
    const gemm::Conv2dShape shape = gemm::conv2d_shape(x.sizes(), w.sizes(), c.outputs[0].sizes(),
                                                       a.stride, a.padding, a.dilation, a.groups);
    gemm::conv2d(shape, nn::cdata<float>(x), packed,
                 bias.defined() ? nn::cdata<float>(bias) : nullptr, nn::mdata<float>(c.outputs[0]));
    return;
  }
  visit_floating_dtype(x.dtype(), "conv2d", [&](auto tag) {
    conv2d_forward<decltype(tag)>(x, w, c.inputs[2], c.outputs[0], g);
  });
}

void conv2d_input_grad_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::Conv2dGradAttrs&>(c.attrs);
  const Tensor grad = nn::dense(c.inputs[0]), w = nn::dense(c.inputs[1]);
  ConvGeom g(a.size, w.sizes(), a.stride, a.padding, a.dilation, a.groups);
  visit_floating_dtype(grad.dtype(), "conv2d_input_grad", [&](auto tag) {
    conv2d_input_grad<decltype(tag)>(grad, w, c.outputs[0], g);
  });
}

void conv2d_weight_grad_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::Conv2dGradAttrs&>(c.attrs);
  const Tensor grad = nn::dense(c.inputs[0]), x = nn::dense(c.inputs[1]);
  ConvGeom g(x.sizes(), a.size, a.stride, a.padding, a.dilation, a.groups);
  visit_floating_dtype(grad.dtype(), "conv2d_weight_grad", [&](auto tag) {
    conv2d_weight_grad<decltype(tag)>(grad, x, c.outputs[0], g);
  });
}

}  // namespace

void register_conv_kernels() {
  constexpr size_t cpu = static_cast<size_t>(DeviceType::CPU);
  ops::conv2d.kernels[cpu] = conv2d_kernel;
  ops::conv2d_input_grad.kernels[cpu] = conv2d_input_grad_kernel;
  ops::conv2d_weight_grad.kernels[cpu] = conv2d_weight_grad_kernel;
}

}  // namespace kiln::cpu::kernels
