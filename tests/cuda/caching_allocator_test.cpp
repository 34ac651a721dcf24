// The caching device allocator's bookkeeping, on a fake device (plain host memory with a
// capacity, streams whose work completes when the test says so): reuse in stream order,
// record_stream, rounding, statistics, and the out-of-memory retry and message.
#include "kiln/cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::cuda {
namespace {

class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}
  ~FakeDevice() override { EXPECT_TRUE(live_.empty()) << live_.size() << " blocks leaked"; }

  void* allocate(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    void* p = std::malloc(bytes);
    live_[p] = bytes;
    used_ += bytes;
    ++device_allocations;
    return p;
  }
  void release(void* ptr) override {
    auto it = live_.find(ptr);
    ASSERT_NE(it, live_.end()) << "released a block the device did not allocate";
    used_ -= it->second;
    live_.erase(it);
    std::free(ptr);
    ++device_releases;
  }
  size_t free_bytes() override { return capacity_ - used_; }
  Event record_event(StreamId stream) override {
    Event e = next_event_++;
    events_[e] = stream;
    return e;
  }
  bool event_done(Event e) override { return !busy_.count(events_.at(e)); }
  void wait_event(Event e) override {
    busy_.erase(events_.at(e));  // the host waits: that stream's work runs to the end
    ++waits;
  }
  void release_event(Event e) override { events_.erase(e); }

  void set_busy(StreamId s) { busy_.insert(s); }
  void finish(StreamId s) { busy_.erase(s); }
  size_t live_events() const { return events_.size(); }

  int device_allocations = 0, device_releases = 0, waits = 0;

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> live_;
  std::map<Event, StreamId> events_;
  std::set<StreamId> busy_;
  Event next_event_ = 1;
};

constexpr StreamId kDefault = 0, kSide = 7;
constexpr size_t MiB = size_t{1} << 20;

TEST(CudaCachingAllocator, RoundsSmallRequestsTo512BytesAndLargeTo2MiB) {
  EXPECT_EQ(CachingAllocator::rounded_size(0), 512u);
  EXPECT_EQ(CachingAllocator::rounded_size(1), 512u);
  EXPECT_EQ(CachingAllocator::rounded_size(512), 512u);
  EXPECT_EQ(CachingAllocator::rounded_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::rounded_size(MiB - 1), MiB);
  EXPECT_EQ(CachingAllocator::rounded_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::rounded_size(5 * MiB), 6 * MiB);
}

TEST(CudaCachingAllocator, ReusesAFreedBlockOnTheSameStreamWithoutTheDevice) {
  FakeDevice device(64 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(1000, kDefault);
  a.deallocate(p);
  void* q = a.allocate(900, kDefault);  // same 1024-byte class
  EXPECT_EQ(q, p);
  EXPECT_EQ(device.device_allocations, 1);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.cache_misses, 1u);
  EXPECT_EQ(s.allocated_bytes, 1024u);
  a.deallocate(q);
}

TEST(CudaCachingAllocator, NeverHandsABlockToAnotherStream) {
  FakeDevice device(64 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(4096, kDefault);
  a.deallocate(p);
  void* q = a.allocate(4096, kSide);
  EXPECT_NE(q, p);
  EXPECT_EQ(device.device_allocations, 2);
  a.deallocate(q);
}

TEST(CudaCachingAllocator, TakesTheSmallestFitUpToTwiceTheRequest) {
  FakeDevice device(256 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* big = a.allocate(64 * MiB, kDefault);
  void* mid = a.allocate(8 * MiB, kDefault);
  a.deallocate(big);
  a.deallocate(mid);
  void* p = a.allocate(6 * MiB, kDefault);  // 8 MiB fits (<= 12 MiB); 64 MiB would waste
  EXPECT_EQ(p, mid);
  void* q = a.allocate(6 * MiB, kDefault);  // only 64 MiB is left: too big, a fresh block
  EXPECT_NE(q, big);
  EXPECT_EQ(device.device_allocations, 3);
  a.deallocate(p);
  a.deallocate(q);
}

TEST(CudaCachingAllocator, ABlockUsedOnAnotherStreamWaitsForThatStream) {
  FakeDevice device(64 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(2048, kDefault);
  a.record_stream(p, kSide);
  device.set_busy(kSide);  // the side stream still reads p
  a.deallocate(p);
  void* q = a.allocate(2048, kDefault);
  EXPECT_NE(q, p) << "reused while another stream may still read it";
  device.finish(kSide);
  void* r = a.allocate(2048, kDefault);
  EXPECT_EQ(r, p);
  EXPECT_EQ(device.live_events(), 0u) << "the event is released once it completed";
  a.deallocate(q);
  a.deallocate(r);
}

TEST(CudaCachingAllocator, RecordStreamOnTheOwnStreamChangesNothing) {
  FakeDevice device(64 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(2048, kDefault);
  a.record_stream(p, kDefault);
  a.deallocate(p);
  EXPECT_EQ(device.live_events(), 0u);
  EXPECT_EQ(a.allocate(2048, kDefault), p);
  a.deallocate(p);
}

TEST(CudaCachingAllocator, CountsAllocatedCachedAndPeak) {
  FakeDevice device(64 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(3 * MiB, kDefault);  // 4 MiB
  void* q = a.allocate(100, kDefault);      // 512 bytes
  EXPECT_EQ(a.stats().allocated_bytes, 4 * MiB + 512);
  a.deallocate(p);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 512u);
  EXPECT_EQ(s.cached_bytes, 4 * MiB);
  EXPECT_EQ(s.peak_allocated_bytes, 4 * MiB + 512);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_allocated_bytes, 512u);
  a.empty_cache();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(device.device_releases, 1);
  a.deallocate(q);
}

TEST(CudaCachingAllocator, OutOfMemoryReleasesTheCacheAndRetries) {
  FakeDevice device(16 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(10 * MiB, kSide);
  a.deallocate(p);                           // cached for the side stream
  void* q = a.allocate(10 * MiB, kDefault);  // no room until the side stream's block goes
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  a.deallocate(q);
}

TEST(CudaCachingAllocator, OutOfMemoryWaitsForPendingBlocksBeforeGivingUp) {
  FakeDevice device(16 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(10 * MiB, kDefault);
  a.record_stream(p, kSide);
  device.set_busy(kSide);
  a.deallocate(p);  // pending on the side stream
  void* q = a.allocate(10 * MiB, kDefault);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(device.waits, 1);
  a.deallocate(q);
}

TEST(CudaCachingAllocator, OutOfMemorySaysWhatWasAskedWhatIsFreeAndTheFix) {
  FakeDevice device(16 * MiB);
  CachingAllocator a(device, "cuda:1");
  void* p = a.allocate(6 * MiB, kDefault);
  try {
    a.allocate(12 * MiB, kDefault);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("out of memory on cuda:1"), std::string::npos) << m;
    EXPECT_NE(m.find("tried to allocate 12.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("10.00 MiB free"), std::string::npos) << m;
    EXPECT_NE(m.find("tensors hold 6.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("Fix:"), std::string::npos) << m;
  }
  a.deallocate(p);
}

TEST(CudaCachingAllocator, AKeptPoolSurvivesEmptyCacheAndOutOfMemoryUntilReleased) {
  FakeDevice device(16 * MiB);
  CachingAllocator a(device, "cuda:0");
  constexpr StreamId kGraph = 9;  // a CUDA graph's capture stream
  a.keep_pool(kGraph);
  void* p = a.allocate(6 * MiB, kGraph);
  a.deallocate(p);  // free, but its address is baked into the graph
  a.empty_cache();
  EXPECT_EQ(device.device_releases, 0);
  EXPECT_EQ(a.stats().cached_bytes, 6 * MiB);
  // Out of memory: the kept block is not given back, and the message says who holds it.
  try {
    a.allocate(12 * MiB, kDefault);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("except 6.00 MiB that captured CUDA graphs keep"), std::string::npos) << m;
  }
  EXPECT_EQ(a.allocate(5 * MiB, kGraph), p);  // the graph's stream still reuses it
  a.deallocate(p);
  a.release_pool(kGraph);
  EXPECT_EQ(device.device_releases, 1);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

TEST(CudaCachingAllocator, FreeingTwiceOrAForeignPointerIsAnError) {
  FakeDevice device(16 * MiB);
  CachingAllocator a(device, "cuda:0");
  void* p = a.allocate(100, kDefault);
  a.deallocate(p);
  try {
    a.deallocate(p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("freed twice, or allocated elsewhere"), std::string::npos);
  }
  int local = 0;
  EXPECT_THROW(a.record_stream(&local, kSide), Error);
  a.deallocate(nullptr);  // like free(nullptr)
}

TEST(CudaCachingAllocator, DestructionReturnsCachedAndPendingBlocks) {
  FakeDevice device(64 * MiB);
  {
    CachingAllocator a(device, "cuda:0");
    void* p = a.allocate(4 * MiB, kDefault);
    void* q = a.allocate(4 * MiB, kDefault);
    a.record_stream(q, kSide);
    device.set_busy(kSide);
    a.deallocate(p);
    a.deallocate(q);
  }
  EXPECT_EQ(device.device_releases, 2);  // ~FakeDevice checks nothing leaked
}

}  // namespace
}  // namespace kiln::cuda
