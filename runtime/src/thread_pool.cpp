// The thread pool. Algorithm: one job at a time; the job's range is cut into chunks that
// the caller and the workers claim with an atomic counter. Workers spin briefly after a
// job (back-to-back kernels are common) and then sleep on a condition variable, so idle
// threads never steal a core from other work for long.
#include "kiln/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

namespace {

thread_local bool tls_in_parallel = false;

struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t begin, end, chunk, chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> remaining{0};
  std::atomic<int> active_workers{0};
  std::mutex error_mutex;
  std::exception_ptr error;

  void work() {
    tls_in_parallel = true;
    for (;;) {
      int64_t c = next.fetch_add(1);
      if (c >= chunks) break;
      int64_t b = begin + c * chunk;
      int64_t e = std::min(end, b + chunk);
      try {
        (*fn)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      remaining.fetch_sub(1, std::memory_order_acq_rel);
    }
    tls_in_parallel = false;
  }
};

class Pool {
 public:
  explicit Pool(int threads) { resize(threads); }
  ~Pool() { stop(); }

  int size() const { return threads_; }

  void resize(int threads) {
    stop();
    threads_ = std::max(1, threads);
    shutdown_ = false;
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  void run(int64_t begin, int64_t end, int64_t chunk, int64_t chunks,
           const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard<std::mutex> submit(submit_mutex_);
    Job job;
    job.fn = &fn;
    job.begin = begin;
    job.end = end;
    job.chunk = chunk;
    job.chunks = chunks;
    job.remaining.store(chunks);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    job.work();
    while (job.remaining.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = nullptr;  // late workers find nothing; those already in hold active_workers
    }
    while (job.active_workers.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  void worker_loop() {
    uint64_t seen = generation_.load();
    for (;;) {
      bool woke = false;
      for (int spin = 0; spin < 20000 && !woke; ++spin)
        woke = generation_.load(std::memory_order_acquire) != seen || shutdown_.load();
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!woke) cv_.wait(lock, [&] { return generation_.load() != seen || shutdown_.load(); });
        if (shutdown_.load()) return;
        seen = generation_.load();
        job = job_;
        if (job) job->active_workers.fetch_add(1);
      }
      if (job) {
        job->work();
        job->active_workers.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
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

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> shutdown_{false};
  Job* job_ = nullptr;
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

}  // namespace

namespace {
std::atomic<int> g_threads{0};  // cached pool().size() for the hot path
}

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

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = pool().size();
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1 || tls_in_parallel) {
    fn(begin, end);
    return;
  }
  int64_t chunk = (n + chunks - 1) / chunks;
  pool().run(begin, end, chunk, chunks, fn);
}

}  // namespace kiln
