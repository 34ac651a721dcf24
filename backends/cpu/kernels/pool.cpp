// CPU kernels for 2-D pooling and its backward ops. Every [N, C] plane is independent, so
// the planes are split across threads (backward scatters stay inside their plane).
#include "kiln/ops/pool.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels.h"
#include "nn_common.h"
#include "pool_simd.h"

namespace kiln::cpu::kernels {

namespace {

struct Planes {
  int64_t planes, H, W, OH, OW;
};

// Runs fn(plane) for every [H, W] plane in parallel; `work` is the cost of one plane.
template <class F>
void for_planes(int64_t planes, int64_t work, F fn) {
  parallel_for(0, planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t p = lo; p < hi; ++p) fn(p);
               });
}

// The output columns [lo, hi) whose window tap at input column ow * stride + off lies inside
// [0, n) (the rest read padding).
void tap_columns(int64_t off, int64_t stride, int64_t n, int64_t outs, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  hi = n - off <= 0 ? 0 : (n - off + stride - 1) / stride;
  lo = std::min(lo, outs);
  hi = std::clamp(hi, lo, outs);
}

// One kernel tap across a row of outputs: src[ow * stride] against the running maximum.
// Taps arrive in window order, so the first maximum wins ties; NaN wins, as in PyTorch.
// Branch-free selects over restrict pointers vectorize.
template <class T>
void max_tap(const T* __restrict src, int64_t stride, T* __restrict best, int64_t* __restrict at,
             int64_t lo, int64_t hi, int64_t base) {
  for (int64_t ow = lo; ow < hi; ++ow) {
    const T v = src[ow * stride];
    const bool take = (v > best[ow]) | (v != v);
    best[ow] = take ? v : best[ow];
    at[ow] = take ? base + ow * stride : at[ow];
  }
}

template <class T>
void sum_tap(const T* __restrict src, int64_t stride, T* __restrict sum, int64_t lo, int64_t hi) {
  for (int64_t ow = lo; ow < hi; ++ow) sum[ow] += src[ow * stride];
}

// `take ? a : b` through bit masks. GCC compiles a data-dependent ?: on floats into a branch,
// which random data mispredicts half the time; the masks are branch-free (and vectorize
// where a row is long enough).
template <class T>
T select_bits(bool take, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(T) == sizeof(U));
  const U mask = U(0) - U(take);
  U ua, ub;
  std::memcpy(&ua, &a, sizeof a);
  std::memcpy(&ub, &b, sizeof b);
  const U r = (ua & mask) | (ub & ~mask);
  T out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

// The running maximum of one window, in window order: the first maximum wins ties and NaN
// wins, as in max_tap.
template <class T>
struct WindowMax {
  T best;
  int64_t at;
  void see(T v, int64_t pos) {
    const bool take = (v > best) | (v != v);
    best = select_bits(take, v, best);
    at = select_bits(take, pos, at);
  }
};

// One output row of kh x kw windows with strides (kh, kw): the path of float64 and of CPUs
// without AVX-512 (pool_avx512.cpp).
template <class T>
void max_pool_tiled_row(const T* in, int64_t W, int64_t ih0, int64_t OW, int64_t kh, int64_t kw,
                        T* best, int64_t* at) {
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t first = ih0 * W + ow * kw;
    WindowMax<T> m{in[first], first};
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) m.see(in[first + i * W + j], first + i * W + j);
    best[ow] = m.best;
    at[ow] = m.at;
  }
}

// The common case of windows that tile the input (kernel == stride, no padding, no
// dilation): each output reads its own kh x kw block, so one pass per output row with the
// window unrolled replaces the tap-major updates, whose per-row set-up dominated on the
// short rows of small images (14 outputs). Same tie and NaN rules as max_tap.
bool windows_tile_input(const ops::MaxPool2dAttrs& a, int64_t H, int64_t W, int64_t OH,
                        int64_t OW) {
  return a.kernel_size == a.stride && a.padding[0] == 0 && a.padding[1] == 0 &&
         a.dilation[0] == 1 && a.dilation[1] == 1 && OH * a.stride[0] <= H && OW * a.stride[1] <= W;
}

void max_pool2d_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::MaxPool2dAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]);
  const Tensor &out = c.outputs[0], &indices = c.outputs[1];
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  const int64_t kh = a.kernel_size[0], kw = a.kernel_size[1], sh = a.stride[0], sw = a.stride[1];
  const int64_t ph = a.padding[0], pw = a.padding[1], dh = a.dilation[0], dw = a.dilation[1];
  visit_floating_dtype(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    T* op = nn::mdata<T>(out);
    // Undefined indices (nothing reads them: the planned executor in inference) are not
    // stored; the scalar loops track them in a row of scratch.
    int64_t* ip = indices.defined() ? nn::mdata<int64_t>(indices) : nullptr;
    auto index_row = [&](int64_t plane, int64_t oh) {
      thread_local std::vector<int64_t> scratch;
      if (ip) return ip + (plane * OH + oh) * OW;
      scratch.resize(static_cast<size_t>(OW));
      return scratch.data();
    };
    if (windows_tile_input(a, H, W, OH, OW)) {
      MaxPool2x2Plane vector_plane = nullptr;
      if constexpr (std::is_same_v<T, float>)
        if (kh == 2 && kw == 2) vector_plane = max_pool_2x2_plane_avx512();
      for_planes(x.size(0) * x.size(1), OH * OW * kh * kw, [&](int64_t plane) {
        const T* in = xp + plane * H * W;
        if constexpr (std::is_same_v<T, float>) {
          if (vector_plane) {
            vector_plane(in, W, OH, OW, op + plane * OH * OW, ip ? ip + plane * OH * OW : nullptr);
            return;
          }
        }
        for (int64_t oh = 0; oh < OH; ++oh) {
          T* best = op + (plane * OH + oh) * OW;
          int64_t* at = index_row(plane, oh);
          max_pool_tiled_row(in, W, oh * kh, OW, kh, kw, best, at);
        }
      });
      return;
    }
    // Each output row's in-plane taps (stepping by the dilation): [h_first, h_end).
    std::vector<int64_t> h_first(OH), h_end(OH), w_first(OW);
    auto first_tap = [](int64_t o, int64_t s, int64_t p, int64_t d) {
      int64_t f = o * s - p;
      return f < 0 ? f + ((-f + d - 1) / d) * d : f;
    };
    for (int64_t oh = 0; oh < OH; ++oh) {
      h_first[oh] = first_tap(oh, sh, ph, dh);
      h_end[oh] = std::min(oh * sh - ph + (kh - 1) * dh + 1, H);
    }
    for (int64_t ow = 0; ow < OW; ++ow) w_first[ow] = first_tap(ow, sw, pw, dw);
    // Tap-major: each (input row, kernel column) updates a whole output row at once.
    for_planes(x.size(0) * x.size(1), OH * OW * kh * kw, [&](int64_t plane) {
      const T* in = xp + plane * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* best = op + (plane * OH + oh) * OW;
        int64_t* at = index_row(plane, oh);
        for (int64_t ow = 0; ow < OW; ++ow) {
          best[ow] = -std::numeric_limits<T>::infinity();
          at[ow] = h_first[oh] * W + w_first[ow];  // PyTorch's index for an all -inf window
        }
        for (int64_t ih = h_first[oh]; ih < h_end[oh]; ih += dh) {
          for (int64_t kj = 0; kj < kw; ++kj) {
            const int64_t off = kj * dw - pw;
            int64_t lo, hi;
            tap_columns(off, sw, W, OW, lo, hi);
            max_tap(in + ih * W + off, sw, best, at, lo, hi, ih * W + off);
          }
        }
      }
    });
  });
}

void max_pool2d_backward_kernel(KernelCall& c) {
  const Tensor grad = nn::dense(c.inputs[0]), indices = nn::dense(c.inputs[1]);
  const Tensor& gx = c.outputs[0];
  const int64_t HW = gx.size(2) * gx.size(3), OHW = grad.size(2) * grad.size(3);
  visit_floating_dtype(grad.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = nn::cdata<T>(grad);
    const int64_t* ip = nn::cdata<int64_t>(indices);
    T* xp = nn::mdata<T>(gx);
    for_planes(grad.size(0) * grad.size(1), HW + OHW, [&](int64_t plane) {
      T* dst = xp + plane * HW;
      std::fill(dst, dst + HW, T(0));
      const T* g = gp + plane * OHW;
      const int64_t* idx = ip + plane * OHW;
      for (int64_t i = 0; i < OHW; ++i) {
        KILN_CHECK(idx[i] >= 0 && idx[i] < HW, "[max_pool2d_backward] index ", idx[i],
                   " is outside the input plane of ", HW,
                   " elements. Fix: pass the indices max_pool2d returned.");
        dst[idx[i]] += g[i];
      }
    });
  });
}

// One average-pooling window: the clipped row/column ranges and the divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};

struct AvgGeom {
  int64_t H, W, kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
  std::optional<int64_t> divisor_override;

  AvgGeom(const ops::AvgPool2dAttrs& a, int64_t H_, int64_t W_)
      : H(H_),
        W(W_),
        kh(a.kernel_size[0]),
        kw(a.kernel_size[1]),
        sh(a.stride[0]),
        sw(a.stride[1]),
        ph(a.padding[0]),
        pw(a.padding[1]),
        count_include_pad(a.count_include_pad),
        divisor_override(a.divisor_override) {}

  AvgWindow window(int64_t oh, int64_t ow) const {
    // The window may cover padding (counted with count_include_pad) but is cut at the
    // padded edge; ceil_mode windows that hang past it count only up to the padded edge.
    int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
    int64_t h1 = std::min(h0 + kh, H + ph), w1 = std::min(w0 + kw, W + pw);
    const int64_t padded_size = (h1 - h0) * (w1 - w0);
    h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
    h1 = std::min(h1, H), w1 = std::min(w1, W);
    double divisor = divisor_override    ? static_cast<double>(*divisor_override)
                     : count_include_pad ? static_cast<double>(padded_size)
                                         : static_cast<double>((h1 - h0) * (w1 - w0));
    return {h0, h1, w0, w1, divisor};
  }
};

void avg_pool2d_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::AvgPool2dAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  const int64_t OH = out.size(2), OW = out.size(3);
  AvgGeom g(a, x.size(2), x.size(3));
  visit_floating_dtype(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    T* op = nn::mdata<T>(out);
    for_planes(x.size(0) * x.size(1), OH * OW * g.kh * g.kw, [&](int64_t plane) {
      const T* in = xp + plane * g.H * g.W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* sum = op + (plane * OH + oh) * OW;
        std::fill(sum, sum + OW, T(0));
        // Tap-major sums over the rows this output row reads, then one divide per output.
        const int64_t h0 = std::max<int64_t>(oh * g.sh - g.ph, 0);
        const int64_t h1 = std::min(oh * g.sh - g.ph + g.kh, g.H);
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t kj = 0; kj < g.kw; ++kj) {
            const int64_t off = kj - g.pw;
            int64_t lo, hi;
            tap_columns(off, g.sw, g.W, OW, lo, hi);
            sum_tap(in + ih * g.W + off, g.sw, sum, lo, hi);
          }
        }
        for (int64_t ow = 0; ow < OW; ++ow) {
          const AvgWindow w = g.window(oh, ow);
          sum[ow] = w.h0 < w.h1 && w.w0 < w.w1 ? static_cast<T>(sum[ow] / w.divisor) : T(0);
        }
      }
    });
  });
}

void avg_pool2d_backward_kernel(KernelCall& c) {
  const auto& b = static_cast<const ops::AvgPool2dBackwardAttrs&>(c.attrs);
  const Tensor grad = nn::dense(c.inputs[0]);
  const Tensor& gx = c.outputs[0];
  const int64_t OH = grad.size(2), OW = grad.size(3);
  AvgGeom g(b.pool, gx.size(2), gx.size(3));
  visit_floating_dtype(grad.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = nn::cdata<T>(grad);
    T* xp = nn::mdata<T>(gx);
    for_planes(grad.size(0) * grad.size(1), OH * OW * g.kh * g.kw + g.H * g.W, [&](int64_t plane) {
      T* dst = xp + plane * g.H * g.W;
      std::fill(dst, dst + g.H * g.W, T(0));
      const T* gpl = gp + plane * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          const AvgWindow w = g.window(oh, ow);
          const T share = static_cast<T>(gpl[oh * OW + ow] / w.divisor);
          for (int64_t ih = w.h0; ih < w.h1; ++ih)
            for (int64_t iw = w.w0; iw < w.w1; ++iw) dst[ih * g.W + iw] += share;
        }
      }
    });
  });
}

// PyTorch's adaptive window along one dim: [floor(o * in / out), ceil((o + 1) * in / out)).
int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

void adaptive_avg_pool2d_kernel(KernelCall& c) {
  const Tensor x = nn::dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  visit_floating_dtype(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    T* op = nn::mdata<T>(out);
    for_planes(x.size(0) * x.size(1), H * W + OH * OW, [&](int64_t plane) {
      const T* in = xp + plane * H * W;
      T* o = op + plane * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
          T sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) sum += in[ih * W + iw];
          o[oh * OW + ow] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
        }
      }
    });
  });
}

void adaptive_avg_pool2d_backward_kernel(KernelCall& c) {
  const Tensor grad = nn::dense(c.inputs[0]);
  const Tensor& gx = c.outputs[0];
  const int64_t H = gx.size(2), W = gx.size(3), OH = grad.size(2), OW = grad.size(3);
  visit_floating_dtype(grad.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = nn::cdata<T>(grad);
    T* xp = nn::mdata<T>(gx);
    for_planes(grad.size(0) * grad.size(1), H * W + OH * OW, [&](int64_t plane) {
      T* dst = xp + plane * H * W;
      std::fill(dst, dst + H * W, T(0));
      const T* g = gp + plane * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
          const T share = g[oh * OW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) dst[ih * W + iw] += share;
        }
      }
    });
  });
}

}  // namespace

void register_pool_kernels() {
  constexpr size_t cpu = static_cast<size_t>(DeviceType::CPU);
  ops::max_pool2d.kernels[cpu] = max_pool2d_kernel;
  ops::max_pool2d_backward.kernels[cpu] = max_pool2d_backward_kernel;
  ops::avg_pool2d.kernels[cpu] = avg_pool2d_kernel;
  ops::avg_pool2d_backward.kernels[cpu] = avg_pool2d_backward_kernel;
  ops::adaptive_avg_pool2d.kernels[cpu] = adaptive_avg_pool2d_kernel;
  ops::adaptive_avg_pool2d_backward.kernels[cpu] = adaptive_avg_pool2d_backward_kernel;
}

}  // namespace kiln::cpu::kernels
