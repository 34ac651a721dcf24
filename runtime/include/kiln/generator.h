// Seeded random numbers that are identical on every run and machine: a counter-based
// Philox4x32-10 stream and kiln's own float conversions (no std:: distributions, whose
// output differs between standard libraries).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace kiln {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }

  // Reserves `n` 128-bit blocks and returns the counter of the first; kernels then draw
  // block i with philox(seed, offset + i) in any order or thread.
  uint64_t reserve(uint64_t n);
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

  static std::array<uint32_t, 4> philox(uint64_t key, uint64_t counter);
  // 24 random bits -> [0, 1) float; 53 bits -> [0, 1) double.
  static float to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }
  static double to_unit_double(uint32_t hi, uint32_t lo) {
    return static_cast<double>((static_cast<uint64_t>(hi) << 21) | (lo >> 11)) * 0x1.0p-53;
  }

  std::mutex& mutex() { return mutex_; }

 private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
  std::mutex mutex_;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace kiln
