// One loaded artifact run by kiln_rt from several threads at once, as a server would: every
// result equals the single-threaded run's bit for bit, for a planned graph (native kernels)
// at one and two kiln_rt pool threads and for a graph with control flow (run node by node);
// a thread's bad call fails alone, with its own error. `./run.sh test --tsan` runs this under
// ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "export/export_test_util.h"
#include "kiln/export.h"
#include "kiln/kiln.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/halving_mlp.h"
#include "kiln_rt.h"
#include "kiln_rt.hpp"

namespace kiln {
namespace {

using export_test::run_rt;
using export_test::ScratchDir;

Tensor randn_batch(std::vector<int64_t> shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {}, &gen);
}

// Exports `model` with a dynamic batch (examples of 4 rows of 12 features).
std::string export_dynamic(const std::shared_ptr<nn::Module>& model, const ScratchDir& scratch) {
  model->eval();
  ExportOptions options;
  options.dynamic_batch = true;
  return export_model(model, {randn_batch({4, 12}, 1)}, scratch.path("m.kiln"), options).dir;
}

// Four threads, 25 runs each over batch sizes 1..7, against one thread's results.
void expect_threads_match_one_thread(const kiln_rt::Model& rt) {
  const std::vector<int64_t> batches{1, 2, 3, 5, 7};
  std::vector<Tensor> inputs, expected;
  for (int64_t b : batches) {
    inputs.push_back(randn_batch({b, 12}, 40 + static_cast<uint64_t>(b)));
    expected.push_back(run_rt(rt, {inputs.back()})[0]);
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 25; ++k) {
        size_t i = static_cast<size_t>(t + k) % batches.size();
        try {
          kiln_rt::Outputs out = rt.run({kiln_rt::Model::input(
              static_cast<const float*>(inputs[i].raw_data()), {batches[i], 12})});
          const Tensor& want = expected[i];
          if (out.shape(0) != std::vector<int64_t>(want.sizes().begin(), want.sizes().end()) ||
              std::memcmp(out.data<float>(0), want.raw_data(),
                          static_cast<size_t>(want.numel()) * sizeof(float)) != 0)
            ++mismatches;
        } catch (const kiln_rt::Error&) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(failures.load(), 0);
}

// kiln_rt's pool size is set between runs (never during one, as kiln_rt.h asks).
class ScopedRtThreads {
 public:
  explicit ScopedRtThreads(int n) : saved_(kiln_rt::num_threads()) { kiln_rt::set_num_threads(n); }
  ~ScopedRtThreads() { kiln_rt::set_num_threads(saved_); }
  ScopedRtThreads(const ScopedRtThreads&) = delete;
  ScopedRtThreads& operator=(const ScopedRtThreads&) = delete;

 private:
  int saved_;
};

TEST(ConcurrentKilnRt, ThreadsRunOneLoadedModelLikeOneThreadAtOnePoolThread) {
  ScratchDir scratch("threads");
  manual_seed(3);
  const kiln_rt::Model rt(
      export_dynamic(models::build(models::FashionMLPConfig{12, 16, 5, 0.3}), scratch));
  ScopedRtThreads pool(1);
  expect_threads_match_one_thread(rt);
}

// Two pool threads: the runs' kernels also share kiln_rt's one pool.
TEST(ConcurrentKilnRt, ThreadsRunOneLoadedModelLikeOneThreadAtTwoPoolThreads) {
  ScratchDir scratch("threads");
  manual_seed(3);
  const kiln_rt::Model rt(
      export_dynamic(models::build(models::FashionMLPConfig{12, 16, 5, 0.3}), scratch));
  ScopedRtThreads pool(2);
  expect_threads_match_one_thread(rt);
}

// A while_loop keeps the graph off the planned executor: each thread's run takes a reference
// executor of its own (with the fused kernels bound to it).
TEST(ConcurrentKilnRt, ThreadsRunAGraphWithControlFlowLikeOneThread) {
  ScratchDir scratch("threads");
  manual_seed(4);
  const kiln_rt::Model rt(
      export_dynamic(models::build(models::HalvingMLPWhileConfig{{12, 16, 5}}), scratch));
  expect_threads_match_one_thread(rt);
}

// Bad calls fail on their own thread, with their own kiln_rt_last_error(), while good calls
// on the others go on.
TEST(ConcurrentKilnRt, EachThreadGetsItsOwnError) {
  ScratchDir scratch("threads");
  manual_seed(3);
  const kiln_rt::Model rt(
      export_dynamic(models::build(models::FashionMLPConfig{12, 16, 5, 0.3}), scratch));
  Tensor good = randn_batch({3, 12}, 5), bad = randn_batch({3, 11}, 6);
  std::atomic<int> unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tensor& x = t % 2 ? bad : good;
      for (int k = 0; k < 10; ++k) {
        try {
          rt.run({kiln_rt::Model::input(static_cast<const float*>(x.raw_data()), {3, x.size(1)})});
          if (t % 2) ++unexpected;
        } catch (const kiln_rt::Error& e) {
          const std::string msg = e.what(), last = kiln_rt_last_error();
          if (!(t % 2) || msg.find("dim 1 is 11") == std::string::npos || last != msg) ++unexpected;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(unexpected.load(), 0);
}

}  // namespace
}  // namespace kiln
