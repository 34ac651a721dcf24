// The thread pool. Algorithm: one job at a time, described in the pool itself (not on the
// caller's stack). Publishing a job closes the claim word, rewrites the description, and
// opens the word under a new generation; the job's chunks are
// claimed with a compare-and-swap on one word that holds the generation and the next
// chunk, so a thread can only ever claim a chunk of the job it read, and a late or
// descheduled worker never holds the caller up: the caller returns as soon as every chunk
// has finished, whoever ran it. Workers spin (with pause) for a while after a job, since
// back-to-back kernels are the common case, then sleep on a condition variable; the caller
// touches the mutex only when some worker sleeps.
#include "kiln/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln {

namespace {

thread_local bool tls_in_parallel = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// How long an idle worker keeps spinning before it sleeps: long enough to cover the gaps
// between the kernels of one forward pass, short enough that an idle process gives its
// cores back within a millisecond.
constexpr auto kSpinTime = std::chrono::microseconds(500);

using JobFn = std::function<void(int64_t, int64_t)>;

// The claim word: generation in the high 32 bits, the next unclaimed chunk in the low 32.
// Publishing a job takes two generations: the first closes the word (kClosed, more than any
// job's chunk count) while the description is rewritten, the second opens the new job.
constexpr uint64_t pack(uint64_t generation, uint64_t chunk) { return generation << 32 | chunk; }
constexpr uint32_t kClosed = 0xffffffffu;
constexpr uint32_t generation_of(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
constexpr uint32_t chunk_of(uint64_t word) { return static_cast<uint32_t>(word); }

class Pool {
 public:
  explicit Pool(int threads) { resize(threads); }
  ~Pool() { stop(); }

  int size() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    std::lock_guard<std::mutex> submit(submit_mutex_);
    stop();
    threads_.store(std::max(1, threads), std::memory_order_relaxed);
    shutdown_ = false;
    for (int i = 1; i < size(); ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  void run(int64_t begin, int64_t end, int64_t chunk, int64_t chunks, const JobFn& fn) {
    std::lock_guard<std::mutex> submit(submit_mutex_);
    // No thread can be inside a chunk now (the previous job finished all of its chunks),
    // so the description is ours to rewrite. Close the claim word first: the finished job's
    // word is still current, and a worker that read it and then this job's larger chunk
    // count would otherwise claim a chunk "past the end" of the old job, running a mix of
    // the two descriptions. A worker that reads a description value written here (acquire)
    // sees the closed word or a later one, so its claim fails.
    const uint32_t closed = generation_of(claim_.load(std::memory_order_relaxed)) + 1;
    claim_.store(pack(closed, kClosed), std::memory_order_seq_cst);
    fn_.store(&fn, std::memory_order_release);
    begin_.store(begin, std::memory_order_release);
    end_.store(end, std::memory_order_release);
    chunk_.store(chunk, std::memory_order_release);
    chunks_.store(chunks, std::memory_order_release);
    finished_.store(0, std::memory_order_relaxed);
    const uint32_t generation = closed + 1;
    claim_.store(pack(generation, 0), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(mutex_); }
      cv_.notify_all();
    }
    work(generation);
    while (finished_.load(std::memory_order_acquire) != chunks) cpu_relax();
    if (error_) {
      std::exception_ptr error = std::move(error_);
      error_ = nullptr;
      std::rethrow_exception(error);
    }
  }

 private:
  // Claims and runs chunks of `generation` until none is left (or a newer job replaced it).
  void work(uint32_t generation) {
    tls_in_parallel = true;
    for (;;) {
      uint64_t word = claim_.load(std::memory_order_acquire);
      // Read after the acquire, the description is this generation's or, should a newer job
      // have replaced it meanwhile, the claim below fails and nothing read is used.
      const JobFn* fn = fn_.load(std::memory_order_acquire);
      const int64_t begin = begin_.load(std::memory_order_acquire);
      const int64_t end = end_.load(std::memory_order_acquire);
      const int64_t chunk = chunk_.load(std::memory_order_acquire);
      const int64_t chunks = chunks_.load(std::memory_order_acquire);
      if (generation_of(word) != generation || chunk_of(word) >= chunks) break;
      if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
        continue;
      const int64_t b = begin + static_cast<int64_t>(chunk_of(word)) * chunk;
      try {
        (*fn)(b, std::min(end, b + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      finished_.fetch_add(1, std::memory_order_release);
    }
    tls_in_parallel = false;
  }

  void worker_loop() {
    uint32_t seen = generation_of(claim_.load());
    for (;;) {
      uint32_t current = wait_for_job(seen);
      if (shutdown_.load()) return;
      seen = current;
      work(current);
    }
  }

  // Spins, then sleeps, until a generation other than `seen` is published or the pool stops.
  uint32_t wait_for_job(uint32_t seen) {
    auto fresh = [&] { return generation_of(claim_.load(std::memory_order_acquire)) != seen; };
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int spin = 1;; ++spin) {
      if (fresh() || shutdown_.load(std::memory_order_relaxed))
        return generation_of(claim_.load(std::memory_order_acquire));
      cpu_relax();
      if (spin % 256 == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    // Announce the sleep before the last look: the caller publishes, then reads sleepers_
    // (both sequentially consistent), so either it sees us and notifies under the mutex,
    // or we see its job here.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock, [&] { return fresh() || shutdown_.load(); });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return generation_of(claim_.load(std::memory_order_acquire));
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  // Atomic: set_num_threads reads it outside the submit mutex while another thread may be
  // resizing.
  std::atomic<int> threads_{1};
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one job at a time

  // The current job.
  alignas(64) std::atomic<uint64_t> claim_{0};
  std::atomic<const JobFn*> fn_{nullptr};
  std::atomic<int64_t> begin_{0}, end_{0}, chunk_{1}, chunks_{0};
  alignas(64) std::atomic<int64_t> finished_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;

  // Sleeping workers.
  alignas(64) std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> shutdown_{false};
};

int default_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool* p = new Pool(default_threads());  // leaked: workers may outlive statics
  return *p;
}

std::atomic<int> g_threads{0};  // cached pool().size() for the hot path

}  // namespace

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = pool().size();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) {
  if (n != pool().size()) pool().resize(n);
  g_threads.store(pool().size(), std::memory_order_relaxed);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain, const JobFn& fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1 || tls_in_parallel) {
    fn(begin, end);
    return;
  }
  int64_t chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;  // a rounded-up chunk size can leave the last one empty
  pool().run(begin, end, chunk, chunks, fn);
}

}  // namespace kiln
