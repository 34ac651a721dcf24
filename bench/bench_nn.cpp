// kiln::nn::functional benchmarks (softmax, layer_norm, conv2d), each beside a plain
// baseline on preallocated buffers in the same run: Eigen array code for the row-wise ops,
// im2col + cblas_sgemm for conv2d. Before timing, each baseline is checked against kiln's
// result, so both sides provably do the same work.
#include <cblas.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string>

#include "bench_util.h"

namespace kiln::bench {
namespace {

namespace F = kiln::nn::functional;
using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
using Vec = Eigen::Map<Arr>;
using CVec = Eigen::Map<const Arr>;

// Fails the benchmark when the baseline disagrees with kiln.
bool same_result(benchmark::State& state, const Tensor& kiln_out, const float* baseline,
                 float tol) {
  const float* k = kiln_out.data_ptr<float>();
  float worst = 0;
  for (int64_t i = 0; i < kiln_out.numel(); ++i)
    worst = std::max(worst, std::abs(k[i] - baseline[i]));
  if (worst <= tol) return true;
  state.SkipWithError(("baseline differs from kiln by " + std::to_string(worst)).c_str());
  return false;
}

// Rows x cols, threads.
void row_grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads"});
  for (int64_t threads : {1, 2}) {
    b->Args({4096, 1024, threads});
    b->Args({128, 10, threads});  // classifier logits: mostly overhead
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// ---- softmax over the last dim ----

void softmax_baseline(const float* x, float* y, int64_t rows, int64_t cols) {
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      CVec xr(x + r * cols, cols);
      Vec yr(y + r * cols, cols);
      yr = (xr - xr.maxCoeff()).exp();
      yr *= 1.0f / yr.sum();
    }
  });
}

void BM_Softmax(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  ThreadsScope threads(static_cast<int>(state.range(2)));
  Tensor x = filled({rows, cols}, 1);
  for (auto _ : state) benchmark::DoNotOptimize(F::softmax(x, -1));
  state.SetBytesProcessed(state.iterations() * 2 * rows * cols * 4);
}
BENCHMARK(BM_Softmax)->Apply(row_grid);

void BM_Softmax_BaselineEigen(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  ThreadsScope threads(static_cast<int>(state.range(2)));
  Tensor x = filled({rows, cols}, 1);
  HostBuffer y(rows * cols);
  softmax_baseline(x.data_ptr<float>(), y.data(), rows, cols);
  if (!same_result(state, F::softmax(x, -1), y.data(), 1e-6f)) return;
  for (auto _ : state) {
    softmax_baseline(x.data_ptr<float>(), y.data(), rows, cols);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * rows * cols * 4);
}
BENCHMARK(BM_Softmax_BaselineEigen)->Apply(row_grid);

// ---- layer_norm over the last dim, with weight and bias ----

void layer_norm_baseline(const float* x, const float* w, const float* b, float* y, int64_t rows,
                         int64_t cols) {
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      CVec xr(x + r * cols, cols);
      const float mu = xr.sum() / static_cast<float>(cols);
      const float var = (xr - mu).square().sum() / static_cast<float>(cols);
      const float rs = 1.0f / std::sqrt(var + 1e-5f);
      Vec(y + r * cols, cols) = (xr - mu) * rs * CVec(w, cols) + CVec(b, cols);
    }
  });
}

void BM_LayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  ThreadsScope threads(static_cast<int>(state.range(2)));
  Tensor x = filled({rows, cols}, 1), w = filled({cols}, 2), b = filled({cols}, 3);
  for (auto _ : state) benchmark::DoNotOptimize(F::layer_norm(x, {cols}, w, b));
  state.SetBytesProcessed(state.iterations() * 2 * rows * cols * 4);
}
BENCHMARK(BM_LayerNorm)->Apply(row_grid);

void BM_LayerNorm_BaselineEigen(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  ThreadsScope threads(static_cast<int>(state.range(2)));
  Tensor x = filled({rows, cols}, 1), w = filled({cols}, 2), b = filled({cols}, 3);
  HostBuffer y(rows * cols);
  const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pb = b.data_ptr<float>();
  layer_norm_baseline(px, pw, pb, y.data(), rows, cols);
  if (!same_result(state, F::layer_norm(x, {cols}, w, b), y.data(), 1e-5f)) return;
  for (auto _ : state) {
    layer_norm_baseline(px, pw, pb, y.data(), rows, cols);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * rows * cols * 4);
}
BENCHMARK(BM_LayerNorm_BaselineEigen)->Apply(row_grid);

// ---- conv2d, 3x3, stride 1, padding 1, batch 32 on 32x32 images ----

struct ConvShape {
  int64_t n, c, h, w, oc;
  int64_t k = 9;  // 3x3 taps
  int64_t flops() const { return 2 * n * oc * c * k * h * w; }
};

ConvShape conv_shape(const benchmark::State& state) {
  return {32, state.range(0), 32, 32, state.range(1)};
}

void conv_grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"c", "oc", "threads"});
  for (int64_t threads : {1, 2}) {
    b->Args({3, 64, threads});   // a first layer
    b->Args({64, 64, threads});  // a middle layer
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

// im2col of one image into col [c * 9, h * w], then out [oc, h * w] = w [oc, c * 9] @ col + bias.
void conv_baseline(const ConvShape& s, const float* x, const float* w, const float* bias, float* y,
                   float* cols) {
  const int64_t K = s.c * s.k, P = s.h * s.w;
  parallel_for(0, s.n, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t img = lo; img < hi; ++img) {
      float* col = cols + img * K * P;
      const float* xi = x + img * s.c * P;
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t ki = 0; ki < 3; ++ki)
          for (int64_t kj = 0; kj < 3; ++kj) {
            float* row = col + ((c * 3 + ki) * 3 + kj) * P;
            for (int64_t oh = 0; oh < s.h; ++oh) {
              const int64_t ih = oh - 1 + ki;
              for (int64_t ow = 0; ow < s.w; ++ow) {
                const int64_t iw = ow - 1 + kj;
                row[oh * s.w + ow] = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w
                                         ? xi[(c * s.h + ih) * s.w + iw]
                                         : 0.0f;
              }
            }
          }
      float* yi = y + img * s.oc * P;
      for (int64_t o = 0; o < s.oc; ++o) std::fill(yi + o * P, yi + (o + 1) * P, bias[o]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.oc, P, K, 1.0f, w, K, col, P, 1.0f,
                  yi, P);
    }
  });
}

void BM_Conv2d(benchmark::State& state) {
  const ConvShape s = conv_shape(state);
  ThreadsScope threads(static_cast<int>(state.range(2)));
  Tensor x = filled({s.n, s.c, s.h, s.w}, 1), w = filled({s.oc, s.c, 3, 3}, 2),
         b = filled({s.oc}, 3);
  benchmark::DoNotOptimize(F::conv2d(x, w, b, {1}, {1}));
  for (auto _ : state) benchmark::DoNotOptimize(F::conv2d(x, w, b, {1}, {1}));
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(s.flops()),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Conv2d)->Apply(conv_grid);

void BM_Conv2d_BaselineIm2colSgemm(benchmark::State& state) {
  const ConvShape s = conv_shape(state);
  ThreadsScope threads(static_cast<int>(state.range(2)));
  Tensor x = filled({s.n, s.c, s.h, s.w}, 1), w = filled({s.oc, s.c, 3, 3}, 2),
         b = filled({s.oc}, 3);
  HostBuffer y(s.n * s.oc * s.h * s.w), cols(s.n * s.c * s.k * s.h * s.w);
  const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pb = b.data_ptr<float>();
  conv_baseline(s, px, pw, pb, y.data(), cols.data());
  if (!same_result(state, F::conv2d(x, w, b, {1}, {1}), y.data(), 1e-3f)) return;
  for (auto _ : state) {
    conv_baseline(s, px, pw, pb, y.data(), cols.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(s.flops()),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Conv2d_BaselineIm2colSgemm)->Apply(conv_grid);

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::init();
  kiln::bench::add_context();
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
