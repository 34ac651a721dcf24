// sgemm and conv2d benchmarks: kiln::matmul beside the libraries it could call, in the same run —
// kiln's own packed GEMM (kiln/cpu/gemm/gemm.h, with B packed once or per call), OpenBLAS
// (cblas_sgemm), Eigen's GEMM, and oneDNN's dnnl_sgemm when libdnnl-dev is installed
// (measured only, to justify the choice; kiln never links it) — and the FMA peak the
// machine can reach, measured by a register-only kernel. Rates are FLOP/s counters.
#include <cblas.h>
#include <immintrin.h>

#include <Eigen/Core>
#include <string>

#include "bench_util.h"
#include "kiln/cpu/gemm/conv2d.h"
#include "kiln/cpu/gemm/gemm.h"
#include "kiln/nn/functional.h"

#if defined(KILN_BENCH_HAVE_DNNL)
#include <oneapi/dnnl/dnnl.h>
extern "C" void omp_set_num_threads(int);  // from libgomp, which oneDNN runs on
#endif

namespace kiln::bench {
namespace {

void set_flops(benchmark::State& state, int64_t n) {
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n) * n * n,
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

// Sizes x threads, the same grid for every library.
void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (int64_t threads : {1, 2})
    for (int64_t n : {256, 1024, 2048}) b->Args({n, threads});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

// ---- the FMA peak: independent FMA chains on registers only, no memory traffic ----
// 2 FLOP per lane per FMA; enough chains (12) to cover the FMA latency on two ports.

#pragma GCC push_options
#pragma GCC target("avx512f,fma")
__attribute__((noinline)) float fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
__attribute__((noinline)) float fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-3f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0];
}
#pragma GCC pop_options

void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadsScope scope(threads);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const int64_t iters = 1 << 20, lanes = avx512 ? 16 : 8;
  for (auto _ : state) {
    parallel_for(0, threads, 1, [&](int64_t, int64_t) {
      benchmark::DoNotOptimize(avx512 ? fma_loop_avx512(iters) : fma_loop_avx2(iters));
    });
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * 12 * lanes * iters * threads,
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
  state.SetLabel(avx512 ? "avx512" : "avx2");
}
BENCHMARK(BM_FmaPeak)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// kiln's own GEMM with B packed once, outside the timed loop (a frozen weight).
void BM_Sgemm_KilnPrepacked(benchmark::State& state) {
  const int64_t n = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  HostBuffer a(n * n), b(n * n), c(n * n);
  fill(a.data(), n * n, 1);
  fill(b.data(), n * n, 2);
  cpu::gemm::PackedB packed(b.data(), n, n, n, 1);
  for (auto _ : state) {
    cpu::gemm::sgemm(n, a.data(), n, packed, c.data(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
  state.SetLabel(cpu::gemm::kernel_name(cpu::gemm::default_kernel()));
}
BENCHMARK(BM_Sgemm_KilnPrepacked)->Apply(grid);

// The same, packing B on every call (an activation, or a weight that changes).
void BM_Sgemm_KilnPackEachCall(benchmark::State& state) {
  const int64_t n = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  HostBuffer a(n * n), b(n * n), c(n * n);
  fill(a.data(), n * n, 1);
  fill(b.data(), n * n, 2);
  for (auto _ : state) {
    cpu::gemm::PackedB packed(b.data(), n, n, n, 1);
    cpu::gemm::sgemm(n, a.data(), n, packed, c.data(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}
BENCHMARK(BM_Sgemm_KilnPackEachCall)->Apply(grid);

// ---- the shapes of the catalog's layers: x [m, k] times a weight [n, k] transposed ----
// (what nn::Linear computes), kiln's packed GEMM vs OpenBLAS, per shape class.

void layer_grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n", "threads"});
  for (int64_t threads : {1, 2})
    for (int64_t m : {1, 64, 1024})
      for (auto [k, n] : {std::pair<int64_t, int64_t>{256, 256}, {784, 256}, {384, 1536},
                          {1536, 384}, {1024, 1024}, {1024, 4096}})
        b->Args({m, k, n, threads});
  // The BERT-sized encoder's layers on 8 x 41 tokens (bench_compiler's BertEncoderMasked).
  for (int64_t threads : {1, 2})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{384, 1152}, {384, 1536}, {1536, 384}})
      b->Args({328, k, n, threads});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void set_layer_flops(benchmark::State& state) {
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(state.range(0) * state.range(1) * state.range(2)),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_Layer_KilnPrepacked(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  ThreadsScope threads(static_cast<int>(state.range(3)));
  HostBuffer x(m * k), w(n * k), y(m * n);
  fill(x.data(), m * k, 1);
  fill(w.data(), n * k, 2);
  cpu::gemm::PackedB packed(w.data(), k, n, 1, k);
  for (auto _ : state) {
    cpu::gemm::sgemm(m, x.data(), k, packed, y.data(), n);
    benchmark::ClobberMemory();
  }
  set_layer_flops(state);
}
BENCHMARK(BM_Layer_KilnPrepacked)->Apply(layer_grid);

void BM_Layer_KilnMatmul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  ThreadsScope threads(static_cast<int>(state.range(3)));
  Tensor x = filled({m, k}, 1), w = filled({n, k}, 2);
  Tensor wt = w.t();
  benchmark::DoNotOptimize(kiln::matmul(x, wt));
  for (auto _ : state) benchmark::DoNotOptimize(kiln::matmul(x, wt));
  set_layer_flops(state);
}
BENCHMARK(BM_Layer_KilnMatmul)->Apply(layer_grid);

// OpenBLAS on the same layer, its own threads for the 2-thread rows (M = 1 as sgemv, as
// kiln calls it).
void BM_Layer_OpenBLAS(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  HostBuffer x(m * k), w(n * k), y(m * n);
  fill(x.data(), m * k, 1);
  fill(w.data(), n * k, 2);
  openblas_set_num_threads(static_cast<int>(state.range(3)));
  for (auto _ : state) {
    if (m == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w.data(), k, x.data(), 1, 0.0f,
                  y.data(), 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(),
                  k, 0.0f, y.data(), n);
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  set_layer_flops(state);
}
BENCHMARK(BM_Layer_OpenBLAS)->Apply(layer_grid);

void BM_Sgemm_Kiln(benchmark::State& state) {
  const int64_t n = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  Tensor a = filled({n, n}, 1), b = filled({n, n}, 2);
  benchmark::DoNotOptimize(kiln::matmul(a, b));  // warm the allocator's cache
  for (auto _ : state) benchmark::DoNotOptimize(kiln::matmul(a, b));
  set_flops(state, n);
}
BENCHMARK(BM_Sgemm_Kiln)->Apply(grid);

// cblas_sgemm called directly. kiln keeps OpenBLAS single-threaded; for the 2-thread
// baseline OpenBLAS gets its own 2 threads, and is set back to 1 afterwards.
void BM_Sgemm_OpenBLAS(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  HostBuffer a(n * n), b(n * n), c(n * n);
  fill(a.data(), n * n, 1);
  fill(b.data(), n * n, 2);
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  set_flops(state, n);
}
BENCHMARK(BM_Sgemm_OpenBLAS)->Apply(grid);

// Eigen's GEMM on mapped row-major matrices; built without OpenMP, so single-threaded.
void BM_Sgemm_Eigen(benchmark::State& state) {
  const int64_t n = state.range(0);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  HostBuffer a(n * n), b(n * n), c(n * n);
  fill(a.data(), n * n, 1);
  fill(b.data(), n * n, 2);
  Eigen::Map<const Mat> A(a.data(), n, n), B(b.data(), n, n);
  Eigen::Map<Mat> C(c.data(), n, n);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}
BENCHMARK(BM_Sgemm_Eigen)
    ->ArgNames({"n", "threads"})
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({2048, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

#if defined(KILN_BENCH_HAVE_DNNL)
// oneDNN's sgemm (row-major), on its OpenMP threads. Registered last so its spinning
// OpenMP workers cannot disturb the other measurements.
void BM_Sgemm_OneDNN(benchmark::State& state) {
  const int64_t n = state.range(0);
  HostBuffer a(n * n), b(n * n), c(n * n);
  fill(a.data(), n * n, 1);
  fill(b.data(), n * n, 2);
  omp_set_num_threads(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    dnnl_status_t s =
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    if (s != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}
BENCHMARK(BM_Sgemm_OneDNN)->Apply(grid);
#endif

// ---- 3x3 convolutions (padding 1): BatchNormCNN's two layers at batch 64 and a
// ResNet-sized layer at batch 1, stride 1 and 2. Args: batch, in and out channels, size,
// stride, threads.
void conv_grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "cin", "cout", "hw", "s", "threads"});
  for (int threads : {1, 2}) {
    b->Args({64, 1, 32, 28, 1, threads});
    b->Args({8, 3, 32, 64, 1, threads});  // an RGB stem: depth 27, the shallow kernel's limit
    b->Args({64, 32, 64, 14, 1, threads});
    b->Args({1, 64, 64, 56, 1, threads});
    b->Args({1, 64, 128, 56, 2, threads});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

cpu::gemm::Conv2dShape conv_shape(const benchmark::State& state) {
  const int64_t hw = state.range(3), stride = state.range(4), out = (hw + 2 - 3) / stride + 1;
  return {.batch = state.range(0),
          .channels = state.range(1),
          .height = hw,
          .width = hw,
          .out_channels = state.range(2),
          .kernel_h = 3,
          .kernel_w = 3,
          .stride_h = stride,
          .stride_w = stride,
          .pad_h = 1,
          .pad_w = 1,
          .out_h = out,
          .out_w = out};
}

void set_conv_flops(benchmark::State& state, const cpu::gemm::Conv2dShape& s) {
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(s.batch * s.out_channels * s.depth() * s.out_h * s.out_w),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// kiln's direct convolution with its weights packed once (a frozen graph).
void BM_Conv_KilnDirectPrepacked(benchmark::State& state) {
  const cpu::gemm::Conv2dShape s = conv_shape(state);
  ThreadsScope threads(static_cast<int>(state.range(5)));
  HostBuffer x(s.batch * s.channels * s.height * s.width), w(s.out_channels * s.depth()),
      y(s.batch * s.out_channels * s.out_h * s.out_w);
  fill(x.data(), x.size(), 1);
  fill(w.data(), w.size(), 2);
  if (!cpu::gemm::has_direct_conv()) {
    state.SkipWithError("no direct-convolution micro-kernel for this CPU");
    return;
  }
  cpu::gemm::PackedConvWeights packed(w.data(), s.out_channels, 1, s.channels, 3, 3);
  for (auto _ : state) {
    cpu::gemm::conv2d(s, x.data(), packed, nullptr, y.data());
    benchmark::ClobberMemory();
  }
  set_conv_flops(state, s);
}
BENCHMARK(BM_Conv_KilnDirectPrepacked)->Apply(conv_grid);

// The eager op: kiln::nn::functional::conv2d, packing its weights every call.
void BM_Conv_KilnOp(benchmark::State& state) {
  const cpu::gemm::Conv2dShape s = conv_shape(state);
  ThreadsScope threads(static_cast<int>(state.range(5)));
  Tensor x = filled({s.batch, s.channels, s.height, s.width}, 1);
  Tensor w = filled({s.out_channels, s.channels, 3, 3}, 2);
  const int64_t stride = s.stride_h;
  benchmark::DoNotOptimize(nn::functional::conv2d(x, w, Tensor(), {stride}, {1}));
  for (auto _ : state)
    benchmark::DoNotOptimize(nn::functional::conv2d(x, w, Tensor(), {stride}, {1}));
  set_conv_flops(state, s);
}
BENCHMARK(BM_Conv_KilnOp)->Apply(conv_grid);

// The classic baseline kiln used before: per image, im2col into a [cin * 9, pixels] matrix
// and one cblas_sgemm (OpenBLAS single-threaded, images split across kiln's threads).
void BM_Conv_Im2colOpenBLAS(benchmark::State& state) {
  const cpu::gemm::Conv2dShape s = conv_shape(state);
  ThreadsScope threads(static_cast<int>(state.range(5)));
  const int64_t P = s.out_h * s.out_w, K = s.depth(), H = s.height, W = s.width;
  HostBuffer x(s.batch * s.channels * H * W), w(s.out_channels * K),
      y(s.batch * s.out_channels * P);
  fill(x.data(), x.size(), 1);
  fill(w.data(), w.size(), 2);
  openblas_set_num_threads(1);
  for (auto _ : state) {
    parallel_for(0, s.batch, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> col(static_cast<size_t>(K * P));
      for (int64_t n = lo; n < hi; ++n) {
        const float* img = x.data() + n * s.channels * H * W;
        for (int64_t c = 0; c < s.channels; ++c)
          for (int64_t ki = 0; ki < 3; ++ki)
            for (int64_t kj = 0; kj < 3; ++kj) {
              float* row = col.data() + ((c * 3 + ki) * 3 + kj) * P;
              for (int64_t oh = 0; oh < s.out_h; ++oh)
                for (int64_t ow = 0; ow < s.out_w; ++ow) {
                  const int64_t ih = oh * s.stride_h - 1 + ki, iw = ow * s.stride_w - 1 + kj;
                  row[oh * s.out_w + ow] =
                      ih >= 0 && ih < H && iw >= 0 && iw < W ? img[(c * H + ih) * W + iw] : 0.0f;
                }
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.out_channels, P, K, 1.0f, w.data(),
                    K, col.data(), P, 0.0f, y.data() + n * s.out_channels * P, P);
      }
    });
    benchmark::ClobberMemory();
  }
  set_conv_flops(state, s);
}
BENCHMARK(BM_Conv_Im2colOpenBLAS)->Apply(conv_grid);

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::init();
  kiln::bench::add_context();
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
#if defined(KILN_BENCH_HAVE_DNNL)
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext("onednn",
                              std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                  std::to_string(v->patch) +
                                  (v->cpu_runtime == DNNL_RUNTIME_OMP ? " (OpenMP)" : ""));
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
