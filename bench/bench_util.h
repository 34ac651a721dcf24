// Shared helpers for the benchmark programs: thread-count scopes, baseline buffers that
// get the same memory treatment as kiln's allocator, and deterministic fills.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "kiln/kiln.h"

namespace kiln::bench {

// Sets kiln's thread count for one benchmark and restores it afterwards.
class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadsScope() { set_num_threads(saved_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

// A float buffer for the plain baselines, allocated like kiln's caching allocator does
// for large blocks (2 MiB aligned, transparent huge pages) and touched once, so that
// neither side pays page faults or TLB misses the other does not.
class HostBuffer {
 public:
  explicit HostBuffer(size_t n) : n_(n) {
    size_t bytes =
        (n * sizeof(float) + (size_t{2} << 20) - 1) / (size_t{2} << 20) * (size_t{2} << 20);
    void* p = nullptr;
    if (posix_memalign(&p, size_t{2} << 20, bytes) != 0) std::abort();
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 0, bytes);
    data_.reset(static_cast<float*>(p));
  }
  float* data() { return data_.get(); }
  size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  size_t n_;
  std::unique_ptr<float, Free> data_;
};

// Deterministic values in [-1, 1) without kiln's random ops (any op under test must not
// be needed to set up the benchmark).
inline void fill(float* p, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) * 0x1.0p-23f - 1.0f;
  }
}

inline Tensor filled(IntList sizes, uint32_t seed) {
  Tensor t = Tensor::empty(sizes, kFloat32);
  fill(t.data_ptr<float>(), static_cast<size_t>(t.numel()), seed);
  return t;
}

// Registers machine facts in the JSON/console context of every run.
inline void add_context() {
  benchmark::AddCustomContext("kiln_default_threads", std::to_string(num_threads()));
}

}  // namespace kiln::bench
