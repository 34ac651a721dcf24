// The state epoch: a global counter bumped by every change that compiled modules guard on
// outside their inputs (registering a parameter, buffer or child; train()/eval(); to();
// flipping requires_grad). A compiled call that finds the epoch unchanged since its last
// hit skips re-reading the module's state: the common call costs O(1).
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln {

inline std::atomic<uint64_t>& state_epoch_counter() {
  static std::atomic<uint64_t> counter{1};
  return counter;
}
inline uint64_t state_epoch() {
  return state_epoch_counter().load(std::memory_order_acquire);
}
inline void bump_state_epoch() {
  state_epoch_counter().fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace kiln
