// StallWatch: a thread that sleeps until the current collective has run long enough to be
// worth reporting, then writes its description under "<prefix>/waiting/<rank>".
#include "distributed/stall_watch.h"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <vector>

namespace kiln::distributed {

namespace {
// Appended to the published collective of a rank whose collective failed.
constexpr std::string_view kFailedMark = " [failed]";
}  // namespace

StallWatch::StallWatch(Store& store, std::string prefix, int rank, int size)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size), thread_([this] { loop(); }) {}

StallWatch::~StallWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StallWatch::started(const std::string& description, Milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = true;
    ++op_;
    description_ = description;
    auto after = std::clamp<Milliseconds>(timeout / 4, Milliseconds(20), Milliseconds(10000));
    publish_at_ = std::chrono::steady_clock::now() + after;
  }
  cv_.notify_all();
}

void StallWatch::finished() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
    ++op_;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> publishing(publish_mutex_);
  if (!published_) return;
  published_ = false;
  try {
    store_.set(key(rank_), "");
  } catch (const std::exception&) {
    // Diagnostics only: a store that is gone is reported by the collectives themselves.
  }
}

void StallWatch::failed() {
  std::string description;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    description = description_;
    running_ = false;
    ++op_;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> publishing(publish_mutex_);
  try {
    store_.set(key(rank_), description + std::string(kFailedMark));
    published_ = true;
  } catch (const std::exception&) {
  }
}

void StallWatch::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!running_) {
      cv_.wait(lock);
      continue;
    }
    const uint64_t watched = op_;
    const auto deadline = publish_at_;
    if (cv_.wait_until(lock, deadline, [&] { return stopping_ || op_ != watched; })) continue;
    // The same collective is still running past its threshold: publish it once.
    std::string description = description_;
    lock.unlock();
    {
      std::lock_guard<std::mutex> publishing(publish_mutex_);
      bool still_running;
      {
        std::lock_guard<std::mutex> relock(mutex_);
        still_running = running_ && op_ == watched;
      }
      if (still_running && !published_) {
        try {
          store_.set(key(rank_), description);
          published_ = true;
        } catch (const std::exception&) {
        }
      }
    }
    lock.lock();
    // Wait for this collective to end before watching the next.
    cv_.wait(lock, [&] { return stopping_ || op_ != watched; });
  }
}

std::string StallWatch::where_are_peers(const std::string& mine) const {
  std::vector<std::string> absent, elsewhere, together;
  try {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::string where = store_.check(key(r)) ? store_.get(key(r), Milliseconds(1000)) : "";
      const bool gave_up = where.ends_with(kFailedMark);
      if (gave_up) where.resize(where.size() - kFailedMark.size());
      if (where.empty()) {
        absent.push_back(std::to_string(r));
      } else if (where == mine) {
        together.push_back(std::to_string(r) + (gave_up ? " (failed there)" : ""));
      } else {
        elsewhere.push_back("rank " + std::to_string(r) + (gave_up ? " failed in " : " waits in ") + where);
      }
    }
  } catch (const std::exception&) {
    return "";
  }
  auto ranks = [](const std::vector<std::string>& rs) {
    std::string out = rs.size() > 1 ? "ranks " : "rank ";
    for (size_t i = 0; i < rs.size(); ++i) out += (i ? ", " : "") + rs[i];
    return out;
  };
  std::ostringstream os;
  const char* sep = "";
  if (!absent.empty()) {
    os << ranks(absent) << (absent.size() > 1 ? " are" : " is")
       << " not inside any collective (busy in its own code, stuck, or gone)";
    sep = "; ";
  }
  for (const std::string& e : elsewhere) {
    os << sep << e;
    sep = "; ";
  }
  if (!together.empty()) os << sep << ranks(together) << (together.size() > 1 ? " wait" : " waits") << " in it too";
  return os.str();
}

}  // namespace kiln::distributed
