// Caching CPU allocator. Algorithm: round each request up to a size class (powers of two
// below 1 MiB, 2 MiB multiples above); a freed block goes to its class's free list and is
// handed out again to the next request of that class. Large blocks are 2 MiB aligned and
// marked for transparent huge pages. Sanitizer builds bypass the cache so ASan still sees
// use-after-free.
#include "kiln/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"

namespace kiln {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;

size_t size_class(size_t n) {
  if (n <= 64) return 64;
  if (n < kSmallLimit) {
    size_t c = 64;
    while (c < n) c <<= 1;
    return c;
  }
  return (n + kHugePage - 1) / kHugePage * kHugePage;
}

struct State {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  AllocatorStats stats;
  size_t cache_limit = size_t{4} << 30;
};

State& state() {
  static State* s = new State();  // leaked on purpose: tensors may die after main
  return *s;
}

#if defined(KILN_NO_ALLOC_CACHE)
constexpr bool kCacheEnabled = false;
#else
constexpr bool kCacheEnabled = true;
#endif

void* system_allocate(size_t cls) {
  size_t align = cls >= kSmallLimit ? kHugePage : 64;
  void* p = nullptr;
  if (posix_memalign(&p, align, cls) != 0 || p == nullptr) return nullptr;
  if (cls >= kSmallLimit) madvise(p, cls, MADV_HUGEPAGE);
  return p;
}

}  // namespace

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator a;
  return a;
}

void* CpuAllocator::allocate(size_t nbytes) {
  size_t cls = size_class(nbytes);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.free_blocks.find(cls);
    if (kCacheEnabled && it != s.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s.stats.cached_bytes -= cls;
      s.stats.allocated_bytes += cls;
      s.stats.peak_allocated_bytes = std::max(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
      ++s.stats.cache_hits;
      return p;
    }
    ++s.stats.cache_misses;
  }
  void* p = system_allocate(cls);
  if (!p) {
    empty_cache();  // give cached blocks back and try once more
    p = system_allocate(cls);
  }
  KILN_CHECK(p != nullptr, "CpuAllocator: out of memory allocating ", nbytes,
             " bytes. Fix: use smaller batches or free tensors you no longer need.");
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.allocated_bytes += cls;
  s.stats.peak_allocated_bytes = std::max(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
  return p;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t cls = size_class(nbytes);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stats.allocated_bytes -= cls;
    if (kCacheEnabled && s.stats.cached_bytes + cls <= s.cache_limit) {
      s.free_blocks[cls].push_back(ptr);
      s.stats.cached_bytes += cls;
      return;
    }
  }
  std::free(ptr);
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().stats;
}

void CpuAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().stats.peak_allocated_bytes = state().stats.allocated_bytes;
}

void CpuAllocator::empty_cache() {
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    for (auto& [cls, list] : state().free_blocks) {
      blocks.insert(blocks.end(), list.begin(), list.end());
      list.clear();
    }
    state().stats.cached_bytes = 0;
  }
  for (void* p : blocks) std::free(p);
}

void CpuAllocator::set_cache_limit(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().cache_limit = bytes;
  }
  if (stats().cached_bytes > bytes) empty_cache();
}

}  // namespace kiln
