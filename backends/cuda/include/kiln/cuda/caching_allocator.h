// The caching device allocator. cudaMalloc/cudaFree synchronize the device and cost tens of
// microseconds, so, as PyTorch does, kiln keeps freed device blocks and hands them out again.
//
// Blocks are reused in stream order: a block freed on stream S goes back to S's pool at once
// (later work on S runs after the work that used it). Blocks never move between streams'
// pools; they return to the device on empty_cache() or when it runs out of memory. A block
// that other streams also used (record_stream) waits until events recorded on those streams
// when it was freed have completed. A request takes the smallest cached block of its stream
// that fits and is at most twice its size. When the device runs out of memory the allocator
// releases every cached block and tries once more before it throws.
//
// The device is an interface (DeviceMemory), so the bookkeeping is tested on the CPU with a
// fake device (tests/backends/cuda_caching_allocator_test.cpp); device_allocator(index) is the
// one over the real driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/allocator.h"

namespace kiln::cuda {

// A stream, as the allocator sees it: an opaque id (the CUstream's address; 0 is the default
// stream).
using StreamId = uint64_t;

// What the allocator needs from a device.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // nullptr when the device is out of memory; other failures throw.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // What the device reports free, for the out-of-memory message.
  virtual size_t free_bytes() = 0;
  // An event that completes once the work queued on `stream` so far has run.
  using Event = uint64_t;
  virtual Event record_event(StreamId stream) = 0;
  virtual bool event_done(Event event) = 0;
  virtual void wait_event(Event event) = 0;  // blocks until done
  virtual void release_event(Event event) = 0;
};

class CachingAllocator {
 public:
  // `device_name` ("cuda:0") appears in error messages.
  CachingAllocator(DeviceMemory& device, std::string device_name);
  ~CachingAllocator();  // releases the cached blocks (blocks still in use are the owner's)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (512-byte aligned), for use on `stream`. Throws kiln::Error
  // when the device has no room even after the cache is released.
  void* allocate(size_t bytes, StreamId stream);
  // Gives back a block from allocate(); it is reused once its streams' work has run.
  void deallocate(void* ptr);
  // `ptr` is also used on `stream` (not the one it was allocated for): its reuse waits for
  // that stream's work queued up to deallocate().
  void record_stream(void* ptr, StreamId stream);

  // Keeps `stream`'s pool for a CUDA graph captured on it (graph_capture.h): the graph's
  // kernels have its blocks' addresses baked in, so its free blocks stay cached, out of
  // empty_cache() and out of the release before an out-of-memory error, until release_pool.
  void keep_pool(StreamId stream);
  // Ends keep_pool(stream) and returns the pool's free blocks to the device.
  void release_pool(StreamId stream);

  AllocatorStats stats() const;
  void reset_peak();
  // Releases every cached block to the device (waiting for pending ones), except kept pools'.
  void empty_cache();

  // The size a request is rounded up to: 512-byte multiples below 1 MiB, 2 MiB multiples
  // from there.
  static size_t rounded_size(size_t bytes);

 private:
  struct Block {
    size_t size = 0;
    StreamId stream = 0;
    std::set<StreamId> other_streams;  // record_stream
  };
  struct Pending {
    void* ptr;
    Block block;
    std::vector<DeviceMemory::Event> events;
  };

  void* take_cached(size_t size, StreamId stream);  // nullptr when no block fits
  void collect_pending(bool wait);
  void release_cached();

  DeviceMemory& device_;
  std::string device_name_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> in_use_;
  // Free blocks by stream, then size: a request takes the smallest that fits.
  std::map<StreamId, std::multimap<size_t, void*>> free_;
  std::vector<Pending> pending_;
  std::set<StreamId> kept_pools_;
  AllocatorStats stats_;
};

// The caching allocator of GPU `index`, over the driver. Throws kiln::Error when no GPU is
// available.
CachingAllocator& device_allocator(int index = 0);

// device_allocator(index).stats(), and empty_cache(), as torch.cuda.memory_stats /
// empty_cache.
AllocatorStats memory_stats(int index = 0);
void empty_cache(int index = 0);

}  // namespace kiln::cuda
