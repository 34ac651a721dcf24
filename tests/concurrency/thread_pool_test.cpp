// The thread pool's protocol: every chunk of every job runs exactly once whoever claims it,
// back to back (workers spinning) and after a sleep (workers woken); errors reach the
// caller; nested calls run inline; resizing between jobs keeps all of that, and so do
// callers on several threads at once, resizing included.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kiln/error.h"
#include "kiln/thread_pool.h"
#include "test_util.h"

namespace kiln {
namespace {


// Runs one job over [0, n) and checks that each index was visited once.
void expect_each_index_once(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, ManyJobsBackToBackEachCoverTheirRangeOnce) {
  ScopedThreads threads(2);
  for (int job = 0; job < 20000; ++job) expect_each_index_once(1 + job % 7, 1);
}

TEST(ThreadPool, JobsAfterTheWorkersSleptStillRunEveryChunk) {
  ScopedThreads threads(2);
  for (int job = 0; job < 5; ++job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // past the workers' spin
    expect_each_index_once(1000, 10);
  }
}

TEST(ThreadPool, MoreThreadsThanCoresAndResizingBetweenJobs) {
  for (int n : {4, 1, 3, 2}) {
    ScopedThreads threads(n);
    EXPECT_EQ(num_threads(), n);
    for (int job = 0; job < 200; ++job) expect_each_index_once(97, 3);
  }
}

TEST(ThreadPool, AnErrorInAnyChunkReachesTheCallerAndThePoolGoesOn) {
  ScopedThreads threads(2);
  for (int round = 0; round < 50; ++round) {
    EXPECT_THROW(parallel_for(0, 2, 1,
                              [&](int64_t b, int64_t) {
                                if (b == round % 2) throw Error("boom");
                              }),
                 Error);
    expect_each_index_once(64, 1);
  }
}

TEST(ThreadPool, NestedCallsRunInlineOnTheirThread) {
  ScopedThreads threads(2);
  std::atomic<int> inner_chunks{0};
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    const std::thread::id me = std::this_thread::get_id();
    parallel_for(0, 100, 1, [&](int64_t b, int64_t e) {
      EXPECT_EQ(std::this_thread::get_id(), me);
      EXPECT_EQ(e - b, 100);
      inner_chunks.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_chunks.load(), 2);
}

// Compiled modules and kiln_rt models run on several threads, and their kernels share the one
// pool: each caller's job covers its own range once, whoever else submits.
TEST(ThreadPool, ConcurrentCallersEachCoverTheirOwnRange) {
  ScopedThreads threads(2);
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([c] {
      for (int job = 0; job < 300; ++job) expect_each_index_once(1 + (job + c) % 37, 1 + c);
    });
  for (std::thread& t : callers) t.join();
}

// set_num_threads from two threads while two others submit jobs: every job still covers its
// range once, and the pool ends at a size one of them asked for.
TEST(ThreadPool, ConcurrentResizesBesideJobs) {
  ScopedThreads threads(2);
  std::atomic<bool> done{false};
  std::vector<std::thread> callers;
  for (int c = 0; c < 2; ++c)
    callers.emplace_back([&] {
      while (!done) expect_each_index_once(64, 1);
    });
  std::vector<std::thread> resizers;
  for (int r = 0; r < 2; ++r)
    resizers.emplace_back([r] {
      for (int k = 0; k < 20; ++k) set_num_threads(1 + (k + r) % 3);
    });
  for (std::thread& t : resizers) t.join();
  done = true;
  for (std::thread& t : callers) t.join();
  EXPECT_GE(num_threads(), 1);
  EXPECT_LE(num_threads(), 3);
}

}  // namespace
}  // namespace kiln
