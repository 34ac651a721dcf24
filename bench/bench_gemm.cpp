// sgemm benchmarks: kiln::matmul beside the libraries it could call, in the same run —
// OpenBLAS (cblas_sgemm, what kiln calls), Eigen's GEMM, and oneDNN's dnnl_sgemm when
// libdnnl-dev is installed (measured only, to justify the choice; kiln never links it).
// Rates are FLOP/s counters (2 n^3 per product).
#include <cblas.h>

#include <Eigen/Core>
#include <string>

#include "bench_util.h"

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
