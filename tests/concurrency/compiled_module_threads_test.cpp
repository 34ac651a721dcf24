// Threads calling one kiln::compile'd module at once: native kernels run outside the
// module's lock (each call on a plan of its own) while another thread reads explain();
// first calls that miss the cache race to compile; buffer write-backs stay serialized.
// `./run.sh test --tsan` runs this binary under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "frontend/compare_bits.h"
#include "kiln/kiln.h"
#include "kiln/models/residual_mlp.h"
#include "test_util.h"

namespace kiln {
namespace {

// Starts `n` threads running fn(t) together (each waits until all exist) and joins them.
template <class Fn>
void run_together(int n, Fn fn) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      fn(t);
    });
  for (std::thread& t : threads) t.join();
}

// Every entry ran native code (a "cpu:" backend note), not the reference executor.
void expect_native(const ExplainReport& r) {
  for (const ExplainEntry& e : r.entries) EXPECT_EQ(e.backend.rfind("cpu:", 0), 0u) << e.backend;
}

// Four threads call one compiled ResidualMLP (batch sizes with an entry each, two threads
// sharing one) while a fifth reads explain(): every result equals the single-threaded call's
// bit for bit (kiln's pool blocks the products by its own thread count, not by which caller
// runs them), and the counts add up. (A call once held the module's lock throughout: two
// threads ran as one.)
void calls_match_one_thread(int pool_threads) {
  ScopedThreads pool(pool_threads);
  manual_seed(0);
  auto model = models::build(models::MLPConfig{});
  model->eval();
  auto compiled = compile(model);
  const std::vector<int64_t> batches{1, 4, 4, 9};
  std::vector<Tensor> inputs, expected;
  {
    NoGradGuard no_grad;
    for (int64_t b : batches) {
      inputs.push_back(randn({b, 784}));
      expected.push_back(compiled(inputs.back()));  // compiled outside the race: cache hits
      EXPECT_TRUE(close_to(expected.back(), nn::call(*model, inputs.back())));
    }
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      ExplainReport r = explain(compiled);
      if (r.entries.empty()) ++failures;
    }
  });
  const int calls_per_thread = 40;
  run_together(4, [&](int t) {
    NoGradGuard no_grad;
    for (int k = 0; k < calls_per_thread; ++k) {
      const size_t i = static_cast<size_t>(t + k) % batches.size();
      try {
        Tensor got = compiled(inputs[i]);
        if (!same_bits(got, expected[i])) ++mismatches;
      } catch (const Error&) {
        ++failures;
      }
    }
  });
  done = true;
  reader.join();
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(failures, 0);
  ExplainReport r = explain(compiled);
  expect_native(r);
  uint64_t calls = 0;
  for (const ExplainEntry& e : r.entries) calls += e.calls;
  EXPECT_EQ(calls, batches.size() + 4 * calls_per_thread);
  EXPECT_EQ(r.calls, batches.size() + 4 * calls_per_thread);
}

TEST(ConcurrentCompiled, ThreadsCallOneModuleWhileExplainReadsAtOnePoolThread) {
  calls_match_one_thread(1);
}

// Two pool threads: the callers' kernels also share kiln's one thread pool.
TEST(ConcurrentCompiled, ThreadsCallOneModuleWhileExplainReadsAtTwoPoolThreads) {
  calls_match_one_thread(2);
}

// Threads whose first calls all miss the cache at once: each batch size gets its own graph
// (traced under the module's lock, so two traces never interleave) and its result.
TEST(ConcurrentCompiled, FirstCallsOnThreadsEachCompileTheirOwnEntry) {
  manual_seed(1);
  auto model = models::build(models::MLPConfig{.d_in = 32, .d_hidden = 16, .num_blocks = 2});
  model->eval();
  auto compiled = compile(model, {.dynamic = CompileOptions::Dynamic::Off});
  const std::vector<int64_t> batches{1, 2, 3};
  std::vector<Tensor> inputs, got(batches.size());
  for (int64_t b : batches) inputs.push_back(randn({b, 32}));
  run_together(static_cast<int>(batches.size()), [&](int t) {
    NoGradGuard no_grad;
    got[static_cast<size_t>(t)] = compiled(inputs[static_cast<size_t>(t)]);
  });
  NoGradGuard no_grad;
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_TRUE(close_to(got[i], nn::call(*model, inputs[i]))) << "batch " << batches[i];
  ExplainReport r = explain(compiled);
  EXPECT_EQ(r.entries.size(), batches.size());
  expect_native(r);
}

struct NormedLinear : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(6, 4));
  nn::ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  Tensor forward(const Tensor& x) override { return bn(fc(x)); }
};

// Training-mode BatchNorm writes its running statistics back after each compiled call: calls
// from threads run one at a time, so the statistics after them equal as many eager calls'.
TEST(ConcurrentCompiled, BufferWriteBacksFromThreadsAddUpLikeSequentialCalls) {
  manual_seed(2);
  auto eager = std::make_shared<NormedLinear>();
  auto twin = std::make_shared<NormedLinear>();
  twin->load_state_dict(eager->state_dict());
  auto compiled = compile(twin);
  Tensor x = randn({5, 6});
  NoGradGuard no_grad;
  Tensor expected = (*eager)(x);
  for (int k = 1; k < 10; ++k) (*eager)(x);  // the compiled module's 1 + 3 * 3 calls
  compiled(x);                               // compiled outside the race
  std::atomic<int> mismatches{0};
  run_together(3, [&](int) {
    NoGradGuard no_grad;
    for (int k = 0; k < 3; ++k)
      if (!close_to(compiled(x), expected)) ++mismatches;
  });
  EXPECT_EQ(mismatches, 0);
  EXPECT_TRUE(close_to(twin->bn->running_mean, eager->bn->running_mean));
  EXPECT_TRUE(close_to(twin->bn->running_var, eager->bn->running_var));
  EXPECT_EQ(twin->bn->num_batches_tracked.item<int64_t>(), 10);
  expect_native(explain(compiled));
}

}  // namespace
}  // namespace kiln
