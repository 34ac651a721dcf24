// The shared state behind a Work handle, and the queue that runs a group's collectives one
// after another on its communication thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/distributed/process_group.h"

namespace kiln::distributed {

struct Work::State {
  std::string description;  // "all_reduce #12 (sum, float32[1000])"
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  std::chrono::steady_clock::time_point started, finished;

  void finish(std::exception_ptr e);
};

// One thread that runs tasks in the order they were queued: every rank queues its
// collectives in program order, so they meet in the same order on every rank.
class CommThread {
 public:
  CommThread();
  ~CommThread();  // runs what is queued, then stops
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;
  void post(std::function<void()> task);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::distributed
