// Eager op benchmarks, each beside a plain C++ baseline measured in the same run:
// dispatch overhead (1-element add), memory-bound elementwise work (16M-element add and
// the chain relu(x*a+b)*c-d). softmax / layer_norm / conv2d are in bench_nn.cpp.
// Run: ./run.sh bench   (or build/bench/bench_ops --benchmark_filter=Dispatch)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench_util.h"
#include "kiln/dispatch.h"
#include "kiln/ops/elementwise.h"

namespace kiln::bench {
namespace {

constexpr int64_t k16M = int64_t{1} << 24;

// ---- dispatch overhead: a 1-element float32 add ----

void BM_Dispatch_Add(benchmark::State& state) {
  Tensor a = filled({1}, 1), b = filled({1}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::add(a, b));
}
BENCHMARK(BM_Dispatch_Add);

void BM_Dispatch_AddInplace(benchmark::State& state) {
  Tensor a = filled({1}, 1), b = filled({1}, 2);
  for (auto _ : state) {
    a.add_(b);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Dispatch_AddInplace);

// dispatch1 without the frontend's promotion/broadcast checks: the runtime's share.
void BM_Dispatch_DirectDispatch(benchmark::State& state) {
  Tensor inputs[2] = {filled({1}, 1), filled({1}, 2)};
  for (auto _ : state) benchmark::DoNotOptimize(dispatch1(ops::add, TensorSpan(inputs, 2)));
}
BENCHMARK(BM_Dispatch_DirectDispatch);

// The floor: what one add costs without any framework.
void BM_Dispatch_BaselineScalarAdd(benchmark::State& state) {
  float a = 1.0f, b = 2.0f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    float c = a + b;
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_Dispatch_BaselineScalarAdd);

// ---- thread pool: the cost of one 2-chunk parallel_for with no work ----
// Hot: back to back, the worker is still spinning. Cold: after 2 ms of caller-only work,
// by which time the worker has gone to sleep and must be woken (manual timing covers
// only the parallel_for call).

void BM_ParallelFor_Hot(benchmark::State& state) {
  ThreadsScope threads(2);
  for (auto _ : state) {
    parallel_for(0, 2, 1, [](int64_t lo, int64_t hi) { benchmark::DoNotOptimize(lo + hi); });
  }
}
BENCHMARK(BM_ParallelFor_Hot)->UseRealTime();

void BM_ParallelFor_Cold(benchmark::State& state) {
  ThreadsScope threads(2);
  using clock = std::chrono::steady_clock;
  for (auto _ : state) {
    auto until = clock::now() + std::chrono::milliseconds(2);
    while (clock::now() < until) benchmark::ClobberMemory();
    auto t0 = clock::now();
    parallel_for(0, 2, 1, [](int64_t lo, int64_t hi) { benchmark::DoNotOptimize(lo + hi); });
    state.SetIterationTime(std::chrono::duration<double>(clock::now() - t0).count());
  }
}
// Fixed iterations: the timed part is tiny next to the 2 ms gap, so the default
// min-time rule would run for minutes.
BENCHMARK(BM_ParallelFor_Cold)->UseManualTime()->Iterations(300)->Unit(benchmark::kMicrosecond);

// ---- 16M-element add: out = a + b (reads 2, writes 1) ----
// Bytes counted as bytes read + bytes written (no write-allocate traffic), so the rate
// compares directly with the memcpy baseline counted the same way.

void BM_Add16M(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  Tensor a = filled({k16M}, 1), b = filled({k16M}, 2);
  benchmark::DoNotOptimize(kiln::add(a, b));  // warm the allocator's cache
  for (auto _ : state) benchmark::DoNotOptimize(kiln::add(a, b));
  state.SetBytesProcessed(state.iterations() * 3 * k16M * 4);
}
BENCHMARK(BM_Add16M)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(
    benchmark::kMillisecond);

// The same add into a preallocated output (add_ writes a in place: a = a + b).
void BM_Add16M_Inplace(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  Tensor a = filled({k16M}, 1), b = filled({k16M}, 2);
  for (auto _ : state) {
    a.add_(b);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * k16M * 4);
}
BENCHMARK(BM_Add16M_Inplace)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Baseline: a plain loop over preallocated buffers, split like kiln splits it.
void BM_Add16M_BaselineLoop(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  HostBuffer a(k16M), b(k16M), o(k16M);
  fill(a.data(), k16M, 1);
  fill(b.data(), k16M, 2);
  float *pa = a.data(), *pb = b.data(), *po = o.data();
  for (auto _ : state) {
    parallel_for(0, k16M, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) po[i] = pa[i] + pb[i];
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * k16M * 4);
}
BENCHMARK(BM_Add16M_BaselineLoop)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The bandwidth reference: memcpy of the add's output bytes (64 MiB) into a preallocated
// buffer (reads 1, writes 1). On 2 threads each thread copies half.
void BM_Memcpy16M_Baseline(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  HostBuffer src(k16M), dst(k16M);
  fill(src.data(), k16M, 3);
  float *s = src.data(), *d = dst.data();
  for (auto _ : state) {
    if (state.range(0) == 1) {
      std::memcpy(d, s, k16M * sizeof(float));
    } else {
      parallel_for(0, k16M, kParallelGrain, [&](int64_t lo, int64_t hi) {
        std::memcpy(d + lo, s + lo, static_cast<size_t>(hi - lo) * sizeof(float));
      });
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * k16M * 4);
}
BENCHMARK(BM_Memcpy16M_Baseline)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---- the chain relu(x*a+b)*c-d on 16M elements, eager ----
// Eager runs 5 kernels (14 array passes); the fused baseline makes one pass over 5
// inputs and 1 output. Bytes counted are the fused minimum (6 arrays), for both.

void BM_Chain16M(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  Tensor x = filled({k16M}, 1), a = filled({k16M}, 2), b = filled({k16M}, 3), c = filled({k16M}, 4),
         d = filled({k16M}, 5);
  benchmark::DoNotOptimize(kiln::relu(x * a + b) * c - d);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::relu(x * a + b) * c - d);
  state.SetBytesProcessed(state.iterations() * 6 * k16M * 4);
}
BENCHMARK(BM_Chain16M)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_Chain16M_BaselineFused(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  HostBuffer x(k16M), a(k16M), b(k16M), c(k16M), d(k16M), o(k16M);
  fill(x.data(), k16M, 1);
  fill(a.data(), k16M, 2);
  fill(b.data(), k16M, 3);
  fill(c.data(), k16M, 4);
  fill(d.data(), k16M, 5);
  float *px = x.data(), *pa = a.data(), *pb = b.data(), *pc = c.data(), *pd = d.data(),
        *po = o.data();
  for (auto _ : state) {
    parallel_for(0, k16M, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        po[i] = std::max(px[i] * pa[i] + pb[i], 0.0f) * pc[i] - pd[i];
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 6 * k16M * 4);
}
BENCHMARK(BM_Chain16M_BaselineFused)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::init();
  kiln::bench::add_context();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
