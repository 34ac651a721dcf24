// kiln's packed GEMM (kiln/cpu/gemm/gemm.h) against a naive double-precision product: every
// micro-kernel this CPU can run, shapes with partial strips, panels and K blocks, both
// layouts of B, one and two threads, and the epilogue hook (each row exactly once, after
// it is final).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/cpu/gemm/gemm.h"
#include "kiln/cpu/kernels/register.h"
#include "kiln/init.h"
#include "kiln/thread_pool.h"
#include "test_util.h"

extern "C" char* openblas_get_corename(void);  // OpenBLAS, which the eager matmul calls
extern "C" void openblas_set_num_threads(int);

namespace kiln::cpu::gemm {
namespace {

struct Problem {
  int64_t m, k, n;
  bool b_transposed;  // B stored as a weight [n, k], as nn::Linear holds it
};

// Runs the problem with `kernel` and compares with the naive product; the epilogue adds 1
// to each row it is given, so a row missed or given twice, or given before it was final,
// shows up as a wrong value.
void check(const MicroKernel& kernel, const Problem& p, int threads) {
  SCOPED_TRACE(::testing::Message() << kernel_name(kernel) << " m=" << p.m << " k=" << p.k
                                    << " n=" << p.n << (p.b_transposed ? " B^T" : "")
                                    << " threads=" << threads);
  ScopedThreads scope(threads);
  const int64_t lda = p.k + 3, ldc = p.n + 5;  // leading dims wider than the matrices
  std::vector<float> a = kiln::random_floats(p.m * lda, 1);
  std::vector<float> b = kiln::random_floats(p.k * p.n, 2);
  std::vector<float> c(static_cast<size_t>(p.m * ldc), -7.0f);
  auto b_at = [&](int64_t kk, int64_t nn) {
    return p.b_transposed ? b[nn * p.k + kk] : b[kk * p.n + nn];
  };
  PackedB packed = p.b_transposed ? PackedB(b.data(), p.k, p.n, 1, p.k, kernel)
                                  : PackedB(b.data(), p.k, p.n, p.n, 1, kernel);
  std::vector<std::atomic<int>> seen(static_cast<size_t>(p.m));
  sgemm(p.m, a.data(), lda, packed, c.data(), ldc, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      seen[i].fetch_add(1);
      for (int64_t j = 0; j < p.n; ++j) c[i * ldc + j] += 1.0f;
    }
  });
  for (int64_t i = 0; i < p.m; ++i) {
    ASSERT_EQ(seen[i].load(), 1) << "row " << i;
    for (int64_t j = 0; j < p.n; ++j) {
      double ref = 1.0;
      for (int64_t kk = 0; kk < p.k; ++kk) ref += double(a[i * lda + kk]) * double(b_at(kk, j));
      ASSERT_NEAR(c[i * ldc + j], ref, 1e-4 * (1.0 + std::sqrt(double(p.k)))) << i << "," << j;
    }
    for (int64_t j = p.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], -7.0f) << "padding written";
  }
}

TEST(CpuGemm, EveryKernelMatchesNaiveProduct) {
  const std::vector<Problem> problems = {
      {1, 1, 1, false},     {1, 17, 33, true},    {2, 3, 7, false},     {5, 64, 16, true},
      {11, 100, 31, false}, {12, 256, 32, true},  {13, 385, 48, false}, {25, 700, 100, true},
      {64, 256, 256, true}, {100, 520, 65, false}, {3, 1100, 129, true}, {97, 33, 300, false},
      // More rows than one packed block of A holds (256), with row blocks cut at strip ends.
      {300, 64, 8, false},  {263, 40, 256, true}};
  for (const MicroKernel* kernel : available_kernels())
    for (const Problem& p : problems)
      for (int threads : {1, 2}) check(*kernel, p, threads);
}

TEST(CpuGemm, PanelSplitAndRowSplitAgree) {
  // Few rows, many panels: the threads split columns and the epilogue runs afterwards.
  check(default_kernel(), {4, 300, 1000, true}, 2);
  // Many rows: the threads split rows and each runs its rows' epilogue.
  check(default_kernel(), {300, 300, 40, false}, 2);
}

TEST(CpuGemm, EmptyDepthGivesZerosAndStillRunsTheEpilogue) {
  std::vector<float> a(1), b(1), c(3 * 4, 5.0f);
  PackedB packed(b.data(), 0, 4, 4, 1);
  int rows = 0;
  sgemm(3, a.data(), 0, packed, c.data(), 4, [&](int64_t r0, int64_t r1) { rows += int(r1 - r0); });
  for (float v : c) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(rows, 3);
}

TEST(CpuGemm, TheBestKernelComesFirstAndTheGenericOneIsAlwaysThere) {
  std::vector<const MicroKernel*> kernels = available_kernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_STREQ(kernel_name(*kernels.back()), "generic");
  const char* best = "generic";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = "avx2";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    best = "avx512";
  EXPECT_STREQ(kernel_name(*kernels.front()), best);
}

// Debian's OpenBLAS picks its kernels by CPU model (Haswell on AMD Zen 4/5, Prescott on
// Emerald Rapids); kiln::init() makes it follow the CPU's features instead.
TEST(CpuGemm, OpenBlasRunsTheKernelsTheCpuFeaturesCallFor) {
  init();
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE set by the user wins";
  const std::string core = openblas_get_corename();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    EXPECT_TRUE(core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids") << core;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_NE(core, "Prescott");
    EXPECT_NE(core, "Nehalem");
  }
}

// CPU time this process spent (all threads), in ms.
double process_cpu_ms() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
         (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

// OpenBLAS's worker threads spin in sched_yield for about 0.1 s after their last job, taking
// cycles from kiln's pool (a short `kiln run` ran 2x slower). kiln's set-up
// (register_cpu_kernels, through keep_openblas_single_threaded) leaves OpenBLAS
// single-threaded and stops them: while the process sleeps, it spends no CPU time.
TEST(CpuGemm, KilnStopsOpenBlasWorkersThatWouldSpin) {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  if (!sgemm || !dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))
    GTEST_SKIP() << "not OpenBLAS's pthreads build: no worker threads to stop";
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: no workers";
  // Wake OpenBLAS's workers with a multi-threaded product, as another library might.
  openblas_set_num_threads(2);
  const int n = 384;
  std::vector<float> a = kiln::random_floats(n * n, 1), c(n * n);
  sgemm(101 /*row major*/, 111 /*no trans*/, 111, n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f,
        c.data(), n);
  cpu::kernels::keep_openblas_single_threaded();              // what kiln's set-up does once
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // kiln's own workers settle
  const double before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const double spent = process_cpu_ms() - before;
  EXPECT_LT(spent, 20.0) << "threads kept spinning while the process slept";
}

TEST(CpuGemm, AnUnknownKernelNameIsAnErrorListingTheChoices) {
  expect_error([] { kernel_named("avx1024", "KILN_GEMM_KERNEL"); },
               {"KILN_GEMM_KERNEL=avx1024", "Expected one of:", "generic", "Fix:"});
}

}  // namespace
}  // namespace kiln::cpu::gemm
