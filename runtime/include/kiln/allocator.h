// The caching CPU allocator. Fresh large buffers cost ~16k page faults each on small VMs
// (a 64 MiB intermediate costs ~40 ms), so freed blocks are kept mapped and reused by
// size instead of being returned to the OS.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

struct AllocatorStats {
  size_t allocated_bytes = 0;       // handed out and not yet freed
  size_t peak_allocated_bytes = 0;  // high-water mark since the last reset_peak()
  size_t cached_bytes = 0;          // freed blocks kept for reuse
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
};

class CpuAllocator {
 public:
  static CpuAllocator& instance();

  // 64-byte aligned; never returns null (throws kiln::Error when memory runs out).
  void* allocate(size_t nbytes);
  void deallocate(void* ptr, size_t nbytes);

  AllocatorStats stats() const;
  void reset_peak();
  // Returns every cached block to the system.
  void empty_cache();
  // Cached bytes above this are released, oldest size class first (default 4 GiB).
  void set_cache_limit(size_t bytes);

 private:
  CpuAllocator() = default;
};

}  // namespace kiln
