// StallWatch: publishes in the group's store which collective this rank has been waiting in
// for a while, so that a rank whose collective times out can say where each peer is: waiting
// in the same collective, in another one (the ranks issued different collectives), or in
// none at all (busy, stuck in its own code, or gone).
//
// Nothing is written while collectives finish quickly: a rank publishes only once its current
// collective has run for a quarter of its timeout (at most 10 s), and clears the key when it
// finishes. The store is only read after a failure.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/distributed/store.h"

namespace kiln::distributed {

class StallWatch {
 public:
  StallWatch(Store& store, std::string prefix, int rank, int size);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // The communication thread around each collective.
  void started(const std::string& description, Milliseconds timeout);
  void finished();
  // The collective failed: its key stays (published now if it was not), so that peers timing
  // out a moment later still see where this rank was.
  void failed();
  // "rank 1 is not inside any collective; rank 2 waits in this one too", for the collective
  // `mine` that failed on this rank; empty when the store cannot tell.
  std::string where_are_peers(const std::string& mine) const;

 private:
  void loop();
  std::string key(int rank) const { return prefix_ + "/waiting/" + std::to_string(rank); }

  Store& store_;
  std::string prefix_;
  int rank_, size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool running_ = false;
  uint64_t op_ = 0;  // counts collectives, to tell one from the next
  std::string description_;
  std::chrono::steady_clock::time_point publish_at_;
  // Held while writing the key, so that a clear never lands before a stale publish.
  std::mutex publish_mutex_;
  bool published_ = false;  // under publish_mutex_
  std::thread thread_;
};

}  // namespace kiln::distributed
