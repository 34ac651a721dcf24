// Work handles and the communication thread.
#include "distributed/work.h"

#include "kiln/error.h"

namespace kiln::distributed {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "product";
  }
  return "?";
}

void Work::State::finish(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    finished = std::chrono::steady_clock::now();
    error = std::move(e);
    done = true;
  }
  done_cv.notify_all();
}

void Work::wait() const {
  KILN_CHECK(state_, "Work::wait: this handle is empty (default-constructed). Fix: keep the Work a collective "
             "returned.");
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->done_cv.wait(lock, [&] { return state_->done; });
    error = state_->error;
  }
  if (error) std::rethrow_exception(error);
}

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

bool Work::failed() const {
  if (!state_) return false;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done && state_->error;
}

std::string Work::describe() const { return state_ ? state_->description : "(empty work)"; }

std::chrono::steady_clock::time_point Work::started_at() const {
  if (!state_) return {};
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->started;
}

std::chrono::steady_clock::time_point Work::finished_at() const {
  if (!state_) return {};
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished;
}

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void CommThread::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();  // tasks catch their own errors into their Work
  }
}

}  // namespace kiln::distributed
