// kiln's one thread pool. Every parallel kernel (and the GEMM library, which runs
// single-threaded inside it) shares these threads, so two pools never fight for cores.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// Threads used by parallel kernels, the caller included. Defaults to KILN_NUM_THREADS or
// the number of cores.
int num_threads();
void set_num_threads(int n);

// Splits [begin, end) into at most num_threads() chunks of at least `grain` items and runs
// fn(chunk_begin, chunk_end) on them, the calling thread taking the first. Runs inline
// when the range is small or when called from inside another parallel_for.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

// Same, but small ranges run inline without building a std::function (the eager hot
// path for tiny tensors).
template <class F>
inline void parallel_for_fast(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  if (end - begin <= grain || num_threads() == 1) {
    if (end > begin) fn(begin, end);
    return;
  }
  parallel_for(begin, end, grain, std::function<void(int64_t, int64_t)>(std::ref(fn)));
}

// Elements below which an elementwise kernel stays on one thread.
inline constexpr int64_t kParallelGrain = 32768;

}  // namespace kiln
