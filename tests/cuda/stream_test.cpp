// Streams, events and pinned memory (kiln/cuda/stream.h): the current stream per thread and
// GPU, which needs no GPU; every call that reaches the driver naming why there is none; and,
// on a GPU, work ordered and timed on a side stream with copies through pinned memory.
#include "kiln/cuda/stream.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/device.h"
#include "kiln/error.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

TEST(CudaStream, EachThreadStartsOnTheDefaultStreamOfEachGpu) {
  Stream s = current_stream(0);
  EXPECT_TRUE(s.is_default());
  EXPECT_EQ(s.handle(), nullptr);
  EXPECT_EQ(s.id(), 0u);
  EXPECT_EQ(current_stream(3).device(), 3);
  EXPECT_TRUE(current_stream(3) == Stream::default_stream(3));
  EXPECT_FALSE(current_stream(3) == Stream::default_stream(0));
}

TEST(CudaStream, AGuardRestoresTheStreamBeforeIt) {
  {
    StreamGuard on(Stream::default_stream(1));
    EXPECT_TRUE(current_stream(1) == Stream::default_stream(1));
  }
  EXPECT_TRUE(current_stream(1).is_default());
}

TEST(CudaStream, ASideStreamIsCurrentOnlyOnItsThreadAndInItsScope) {
  if (!is_available()) GTEST_SKIP() << "no CUDA device: " << unavailable_reason();
  Stream side = Stream::create(0);
  EXPECT_FALSE(side.is_default());
  {
    StreamGuard on(side);
    EXPECT_TRUE(current_stream(0) == side);
    std::thread other([] { EXPECT_TRUE(current_stream(0).is_default()); });  // per thread
    other.join();
  }
  EXPECT_TRUE(current_stream(0).is_default());
}

TEST(CudaStream, WithoutAGpuEveryDriverCallSaysWhy) {
  if (is_available()) GTEST_SKIP() << "a GPU is here";
  const std::string why = "[cuda] no CUDA device: " + unavailable_reason();
  expect_error([] { Stream::create(0); }, {why});
  expect_error([] { Stream::default_stream(0).synchronize(); }, {why});
  expect_error([] { Stream::default_stream(0).query(); }, {why});
  Event e;
  EXPECT_TRUE(e.query());  // nothing recorded: nothing to wait for, no GPU needed
  e.synchronize();
  e.block(Stream::default_stream(0));
  expect_error([&] { e.record(Stream::default_stream(0)); }, {why});
  expect_error([] { PinnedBuffer b(64); }, {why});
  char host[8] = {};
  expect_error([&] { copy_to_device_async(host, host, 8, Stream::default_stream(0)); }, {why});
  expect_error([&] { copy_to_host_async(host, host, 8, Stream::default_stream(0)); }, {why});
  expect_error([&] { copy_on_device_async(host, host, 8, Stream::default_stream(0)); }, {why});
  expect_error([&] { fill_words_async(host, 0, 2, Stream::default_stream(0)); }, {why});
}

TEST(CudaStream, TimingNeedsTwoRecordedTimingEvents) {
  Event plain, timed_a(true), timed_b(true);
  expect_error([&] { plain.elapsed_ms(timed_b); },
               {"expected two events made with timing (kiln::cuda::Event(true))"});
  expect_error([&] { timed_a.elapsed_ms(timed_b); },
               {"expected both events recorded before timing the work between them"});
}

TEST(CudaStream, PinnedCopiesOnASideStreamAreOrderedAndTimed) {
  if (!is_available()) GTEST_SKIP() << "no CUDA device: " << unavailable_reason();
  const size_t n = 1 << 22;  // 16 MiB of floats
  Stream side = Stream::create(0);
  PinnedBuffer in(n * sizeof(float)), out(n * sizeof(float));
  float* src = static_cast<float*>(in.data());
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<float>(i % 1000) * 0.5f;
  std::memset(out.data(), 0, out.size());
  void* device = device_allocator(0).allocate(n * sizeof(float), side.id());
  Event start(true), end(true);
  start.record(side);
  copy_to_device_async(device, in.data(), in.size(), side);
  copy_to_host_async(out.data(), device, out.size(), side);
  end.record(side);
  end.synchronize();
  EXPECT_TRUE(side.query());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size()), 0);
  const double ms = start.elapsed_ms(end);
  EXPECT_GT(ms, 0);
  std::printf("[gpu] 16 MiB to the GPU and back through pinned memory: %.3f ms (%.1f GB/s each way)\n",
              ms, 2.0 * static_cast<double>(in.size()) / (ms * 1e6));
  device_allocator(0).deallocate(device);
}

}  // namespace
}  // namespace kiln::cuda
