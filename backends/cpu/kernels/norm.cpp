// CPU kernels for layer_norm and batch_norm. layer_norm: one row per normalized group,
// three Eigen-vectorized passes (mean; centered sum of squares; normalize + affine).
// batch_norm: per-channel sums over [N, C, S] (two passes for a stable variance), then one
// output pass out = x * scale[c] + shift[c]. [N, C] inputs (S = 1) accumulate whole rows so
// the passes stay vectorized along C.
#include "kiln/ops/norm.h"

#include <cmath>

#include "eigen_maps.h"
#include "kernels.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

template <class T>
using Arr = EigenArray<T>;
template <class T>
using Vec = ArrayMap<T>;
template <class T>
using CVec = ConstArrayMap<T>;

void layer_norm_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::LayerNormAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]);
  const Tensor w = c.inputs[1].defined() ? nn::dense(c.inputs[1]) : Tensor();
  const Tensor b = c.inputs[2].defined() ? nn::dense(c.inputs[2]) : Tensor();
  const int64_t n = numel(a.normalized_shape);
  const int64_t rows = c.outputs[1].numel();
  visit_floating_dtype(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    const T* wp = w.defined() ? nn::cdata<T>(w) : nullptr;
    const T* bp = b.defined() ? nn::cdata<T>(b) : nullptr;
    T* yp = nn::mdata<T>(c.outputs[0]);
    T* mean = nn::mdata<T>(c.outputs[1]);
    T* rstd = nn::mdata<T>(c.outputs[2]);
    const T eps = static_cast<T>(a.eps);
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t r = lo; r < hi; ++r) {
                     CVec<T> xr(xp + r * n, n);
                     Vec<T> yr(yp + r * n, n);
                     const T mu = xr.sum() / static_cast<T>(n);
                     const T var = (xr - mu).square().sum() / static_cast<T>(n);
                     const T rs = T(1) / std::sqrt(var + eps);
                     if (wp && bp) {
                       yr = (xr - mu) * rs * CVec<T>(wp, n) + CVec<T>(bp, n);
                     } else if (wp) {
                       yr = (xr - mu) * rs * CVec<T>(wp, n);
                     } else if (bp) {
                       yr = (xr - mu) * rs + CVec<T>(bp, n);
                     } else {
                       yr = (xr - mu) * rs;
                     }
                     mean[r] = mu;
                     rstd[r] = rs;
                   }
                 });
  });
}

// Per-channel mean and biased variance of x [N, C, S], accumulated in double.
template <class T>
void channel_stats(const T* x, int64_t N, int64_t C, int64_t S, std::vector<double>& mean,
                   std::vector<double>& var) {
  const double count = static_cast<double>(N * S);
  if (S == 1) {
    // Row accumulation keeps the loops contiguous along C; columns split across threads.
    parallel_for(0, C, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(N, 1)),
                 [&](int64_t c0, int64_t c1) {
                   const int64_t w = c1 - c0;
                   Arr<double> sum = Arr<double>::Zero(w), sq = Arr<double>::Zero(w);
                   for (int64_t n = 0; n < N; ++n)
                     sum += CVec<T>(x + n * C + c0, w).template cast<double>();
                   Arr<double> mu = sum / count;
                   for (int64_t n = 0; n < N; ++n)
                     sq += (CVec<T>(x + n * C + c0, w).template cast<double>() - mu).square();
                   for (int64_t j = 0; j < w; ++j) {
                     mean[c0 + j] = mu[j];
                     var[c0 + j] = sq[j] / count;
                   }
                 });
    return;
  }
  parallel_for(
      0, C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N * S, 1)),
      [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ++ch) {
          double sum = 0;
          for (int64_t n = 0; n < N; ++n)
            sum += static_cast<double>(CVec<T>(x + (n * C + ch) * S, S).sum());
          const double mu = sum / count;
          const T mu_t = static_cast<T>(mu);
          double sq = 0;
          for (int64_t n = 0; n < N; ++n)
            sq += static_cast<double>((CVec<T>(x + (n * C + ch) * S, S) - mu_t).square().sum());
          mean[ch] = mu;
          var[ch] = sq / count;
        }
      });
}

void batch_norm_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::BatchNormAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]);
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const Tensor &weight = c.inputs[1], &bias = c.inputs[2], &rm = c.inputs[3], &rv = c.inputs[4];
  visit_floating_dtype(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = nn::cdata<T>(x);
    std::vector<double> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C)),
        invstd(static_cast<size_t>(C));
    if (a.training) {
      channel_stats<T>(xp, N, C, S, mean, var);
      for (int64_t ch = 0; ch < C; ++ch) invstd[ch] = 1 / std::sqrt(var[ch] + a.eps);
    } else {
      std::vector<double> m = rm.to_vector<double>(), v = rv.to_vector<double>();
      for (int64_t ch = 0; ch < C; ++ch) {
        mean[ch] = m[ch];
        invstd[ch] = 1 / std::sqrt(v[ch] + a.eps);
      }
    }
    std::vector<double> w =
        weight.defined() ? weight.to_vector<double>() : std::vector<double>(C, 1.0);
    std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>(C, 0.0);
    Arr<T> scale(C), shift(C);
    for (int64_t ch = 0; ch < C; ++ch) {
      scale[ch] = static_cast<T>(w[ch] * invstd[ch]);
      shift[ch] = static_cast<T>(b[ch] - mean[ch] * w[ch] * invstd[ch]);
    }
    T* yp = nn::mdata<T>(c.outputs[0]);
    if (S == 1) {
      parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)),
                   [&](int64_t lo, int64_t hi) {
                     for (int64_t n = lo; n < hi; ++n)
                       Vec<T>(yp + n * C, C) = CVec<T>(xp + n * C, C) * scale + shift;
                   });
    } else if (S > 1) {
      parallel_for(0, N * C, std::max<int64_t>(1, kParallelGrain / S), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t ch = i % C;
          Vec<T>(yp + i * S, S) = CVec<T>(xp + i * S, S) * scale[ch] + shift[ch];
        }
      });
    }
    T* save_mean = nn::mdata<T>(c.outputs[1]);
    T* save_invstd = nn::mdata<T>(c.outputs[2]);
    for (int64_t ch = 0; ch < C; ++ch) {
      save_mean[ch] = static_cast<T>(mean[ch]);
      save_invstd[ch] = static_cast<T>(invstd[ch]);
    }
    if (c.outputs.size() == 5) {
      // Running statistics use the unbiased batch variance, as in PyTorch.
      std::vector<double> m = rm.to_vector<double>(), v = rv.to_vector<double>();
      const double count = static_cast<double>(N * S), mom = a.momentum;
      T* new_mean = nn::mdata<T>(c.outputs[3]);
      T* new_var = nn::mdata<T>(c.outputs[4]);
      for (int64_t ch = 0; ch < C; ++ch) {
        new_mean[ch] = static_cast<T>((1 - mom) * m[ch] + mom * mean[ch]);
        new_var[ch] = static_cast<T>((1 - mom) * v[ch] + mom * var[ch] * count / (count - 1));
      }
    }
  });
}

// grad_x = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)) per row, gy = grad * weight;
// grad_weight/grad_bias sum grad * xhat and grad over the rows (per-chunk partial sums).
void layer_norm_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::LayerNormAttrs&>(c.attrs);
  const Tensor g = nn::dense(c.inputs[0]), x = nn::dense(c.inputs[1]);
  const Tensor w = c.inputs[2].defined() ? nn::dense(c.inputs[2]) : Tensor();
  const Tensor mean = nn::dense(c.inputs[3]), rstd = nn::dense(c.inputs[4]);
  const int64_t n = numel(a.normalized_shape), rows = mean.numel();
  visit_floating_dtype(x.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *gp = nn::cdata<T>(g), *xp = nn::cdata<T>(x), *mp = nn::cdata<T>(mean),
            *rp = nn::cdata<T>(rstd);
    const T* wp = w.defined() ? nn::cdata<T>(w) : nullptr;
    T* gx = nn::mdata<T>(c.outputs[0]);
    const int64_t chunks = std::max<int64_t>(
        1, nn::chunk_count(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1))));
    std::vector<Arr<T>> partial(static_cast<size_t>(chunks), Arr<T>::Zero(2 * n));
    nn::run_chunks(rows, chunks, [&](int64_t ch, int64_t lo, int64_t hi) {
      Arr<T> xhat(n), gy(n);
      Vec<T> gw(partial[ch].data(), n), gb(partial[ch].data() + n, n);
      for (int64_t r = lo; r < hi; ++r) {
        CVec<T> gr(gp + r * n, n);
        xhat = (CVec<T>(xp + r * n, n) - mp[r]) * rp[r];
        if (wp) {
          gy = gr * CVec<T>(wp, n);
        } else {
          gy = gr;
        }
        const T s1 = gy.sum() / static_cast<T>(n), s2 = (gy * xhat).sum() / static_cast<T>(n);
        Vec<T>(gx + r * n, n) = (gy - s1 - xhat * s2) * rp[r];
        gw += gr * xhat;
        gb += gr;
      }
    });
    Vec<T> gw(nn::mdata<T>(c.outputs[1]), n), gb(nn::mdata<T>(c.outputs[2]), n);
    gw.setZero();
    gb.setZero();
    for (const Arr<T>& p : partial) {
      gw += p.head(n);
      gb += p.tail(n);
    }
  });
}

// Per channel: sums of grad and grad * xhat (double accumulators), then one pass
// grad_x = A * grad + B * x + C with per-channel constants.
void batch_norm_backward_kernel(KernelCall& c) {
  const Tensor g = nn::dense(c.inputs[0]), x = nn::dense(c.inputs[1]);
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const double count = static_cast<double>(N * S);
  const std::vector<double> mean = c.inputs[3].to_vector<double>(),
                            invstd = c.inputs[4].to_vector<double>();
  const std::vector<double> w =
      c.inputs[2].defined() ? c.inputs[2].to_vector<double>() : std::vector<double>(C, 1.0);
  visit_floating_dtype(x.dtype(), "batch_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *gp = nn::cdata<T>(g), *xp = nn::cdata<T>(x);
    std::vector<double> sg(static_cast<size_t>(C)), sgx(static_cast<size_t>(C));
    if (S == 1) {
      parallel_for(0, C, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(N, 1)),
                   [&](int64_t c0, int64_t c1) {
                     const int64_t width = c1 - c0;
                     Arr<double> a = Arr<double>::Zero(width), b = Arr<double>::Zero(width);
                     const Eigen::Map<const Arr<double>> mu(mean.data() + c0, width);
                     for (int64_t i = 0; i < N; ++i) {
                       Arr<double> gi = CVec<T>(gp + i * C + c0, width).template cast<double>();
                       a += gi;
                       b += gi * (CVec<T>(xp + i * C + c0, width).template cast<double>() - mu);
                     }
                     for (int64_t j = 0; j < width; ++j) {
                       sg[c0 + j] = a[j];
                       sgx[c0 + j] = b[j] * invstd[c0 + j];
                     }
                   });
    } else if (S > 1) {
      parallel_for(
          0, C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N * S, 1)),
          [&](int64_t c0, int64_t c1) {
            for (int64_t ch = c0; ch < c1; ++ch) {
              const T mu = static_cast<T>(mean[ch]);
              double a = 0, b = 0;
              for (int64_t i = 0; i < N; ++i) {
                CVec<T> gb(gp + (i * C + ch) * S, S);
                a += static_cast<double>(gb.sum());
                b += static_cast<double>((gb * (CVec<T>(xp + (i * C + ch) * S, S) - mu)).sum());
              }
              sg[ch] = a;
              sgx[ch] = b * invstd[ch];
            }
          });
    }
    T* gw = nn::mdata<T>(c.outputs[1]);
    T* gb = nn::mdata<T>(c.outputs[2]);
    Arr<T> A(C), B(C), K(C);
    for (int64_t ch = 0; ch < C; ++ch) {
      gw[ch] = static_cast<T>(sgx[ch]);
      gb[ch] = static_cast<T>(sg[ch]);
      const double r = invstd[ch], rw = r * w[ch];
      A[ch] = static_cast<T>(rw);
      B[ch] = static_cast<T>(-rw * r * sgx[ch] / count);
      K[ch] = static_cast<T>(-rw * sg[ch] / count + mean[ch] * rw * r * sgx[ch] / count);
    }
    T* gx = nn::mdata<T>(c.outputs[0]);
    if (S == 1) {
      parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)),
                   [&](int64_t lo, int64_t hi) {
                     for (int64_t i = lo; i < hi; ++i)
                       Vec<T>(gx + i * C, C) =
                           A * CVec<T>(gp + i * C, C) + B * CVec<T>(xp + i * C, C) + K;
                   });
    } else if (S > 1) {
      parallel_for(0, N * C, std::max<int64_t>(1, kParallelGrain / S), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t ch = i % C;
          Vec<T>(gx + i * S, S) =
              A[ch] * CVec<T>(gp + i * S, S) + B[ch] * CVec<T>(xp + i * S, S) + K[ch];
        }
      });
    }
  });
}

}  // namespace

void register_norm_kernels() {
  constexpr size_t cpu = static_cast<size_t>(DeviceType::CPU);
  ops::layer_norm.kernels[cpu] = layer_norm_kernel;
  ops::batch_norm.kernels[cpu] = batch_norm_kernel;
  ops::layer_norm_backward.kernels[cpu] = layer_norm_backward_kernel;
  ops::batch_norm_backward.kernels[cpu] = batch_norm_backward_kernel;
}

}  // namespace kiln::cpu::kernels
