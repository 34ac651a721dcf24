// The caching device allocator's bookkeeping (kiln/cuda/caching_allocator.h). Every public
// function takes the mutex; the device is called with it held, which keeps the counts and
// the device's view in step (device calls here are rare: misses, and events on
// record_stream).
#include "kiln/cuda/caching_allocator.h"

#include <sstream>
#include <utility>

#include "kiln/error.h"

namespace kiln::cuda {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kLargeUnit = size_t{2} << 20;
constexpr size_t kSmallUnit = 512;

std::string bytes_str(size_t n) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed;
  if (n >= (size_t{1} << 30))
    out << static_cast<double>(n) / (1 << 30) << " GiB";
  else if (n >= (size_t{1} << 20))
    out << static_cast<double>(n) / (1 << 20) << " MiB";
  else
    out << n << " bytes";
  return out.str();
}

}  // namespace

size_t CachingAllocator::rounded_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t unit = bytes < kSmallLimit ? kSmallUnit : kLargeUnit;
  return (bytes + unit - 1) / unit * unit;
}

CachingAllocator::CachingAllocator(DeviceMemory& device, std::string device_name)
    : device_(device), device_name_(std::move(device_name)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending(/*wait=*/true);
  kept_pools_.clear();
  release_cached();
}

void* CachingAllocator::take_cached(size_t size, StreamId stream) {
  auto pool = free_.find(stream);
  if (pool == free_.end()) return nullptr;
  auto it = pool->second.lower_bound(size);
  if (it == pool->second.end() || it->first > 2 * size) return nullptr;
  void* ptr = it->second;
  size_t block_size = it->first;
  pool->second.erase(it);
  stats_.cached_bytes -= block_size;
  in_use_[ptr] = Block{block_size, stream, {}};
  return ptr;
}

void CachingAllocator::collect_pending(bool wait) {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    bool done = true;
    for (DeviceMemory::Event e : p.events) {
      if (wait)
        device_.wait_event(e);
      else if (!device_.event_done(e))
        done = false;
    }
    if (!done) {
      ++i;
      continue;
    }
    for (DeviceMemory::Event e : p.events) device_.release_event(e);
    free_[p.block.stream].emplace(p.block.size, p.ptr);
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void CachingAllocator::release_cached() {
  for (auto it = free_.begin(); it != free_.end();) {
    if (kept_pools_.count(it->first)) {
      ++it;
      continue;
    }
    for (auto& [size, ptr] : it->second) {
      device_.release(ptr);
      stats_.cached_bytes -= size;
    }
    it = free_.erase(it);
  }
}

void CachingAllocator::keep_pool(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  kept_pools_.insert(stream);
}

void CachingAllocator::release_pool(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  kept_pools_.erase(stream);
  auto pool = free_.find(stream);
  if (pool == free_.end()) return;
  for (auto& [size, ptr] : pool->second) {
    device_.release(ptr);
    stats_.cached_bytes -= size;
  }
  free_.erase(pool);
}

void* CachingAllocator::allocate(size_t bytes, StreamId stream) {
  const size_t size = rounded_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending(/*wait=*/false);
  void* ptr = take_cached(size, stream);
  if (ptr) {
    ++stats_.cache_hits;
  } else {
    ++stats_.cache_misses;
    ptr = device_.allocate(size);
    if (!ptr) {  // out of memory: give the cache back (pending blocks too) and try again
      collect_pending(/*wait=*/true);
      release_cached();
      ptr = device_.allocate(size);
    }
    KILN_CHECK(ptr, "[cuda] out of memory on ", device_name_, ": tried to allocate ",
               bytes_str(size), "; the device has ", bytes_str(device_.free_bytes()),
               " free, and kiln's tensors hold ", bytes_str(stats_.allocated_bytes),
               " (its cached blocks were released before this error",
               kept_pools_.empty() ? std::string()
                                   : ", except " + bytes_str(stats_.cached_bytes) +
                                         " that captured CUDA graphs keep",
               "). Fix: use a smaller batch, drop references to tensors (and compiled "
               "functions) you no longer need, or compute under kiln::NoGradGuard when no "
               "gradient is needed.");
    in_use_[ptr] = Block{size, stream, {}};
  }
  stats_.allocated_bytes += size;
  if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  return ptr;
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  KILN_CHECK(it != in_use_.end(), "[cuda] record_stream: ", ptr,
             " is not a block in use from this allocator (", device_name_,
             "). Fix: pass a pointer that allocate() returned and that is not yet freed.");
  if (stream != it->second.stream) it->second.other_streams.insert(stream);
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  KILN_CHECK(it != in_use_.end(), "[cuda] deallocate: ", ptr,
             " is not a block in use from this allocator (", device_name_,
             "): freed twice, or allocated elsewhere. Fix: free each block once, with the "
             "allocator that made it.");
  Block block = std::move(it->second);
  in_use_.erase(it);
  stats_.allocated_bytes -= block.size;
  stats_.cached_bytes += block.size;
  if (block.other_streams.empty()) {
    free_[block.stream].emplace(block.size, ptr);
    return;
  }
  Pending p{ptr, block, {}};
  for (StreamId s : block.other_streams) p.events.push_back(device_.record_event(s));
  pending_.push_back(std::move(p));
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending(/*wait=*/true);
  release_cached();
}

}  // namespace kiln::cuda
