// Helpers shared by the test suites: checking kiln::Error messages, thread counts, random
// operands.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"
#include "kiln/thread_pool.h"

namespace kiln {

// The message of the kiln::Error that f throws, or a marker no check will find.
template <class Fn>
std::string error_of(Fn&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no kiln::Error was thrown>";
}

// Expects f to throw a kiln::Error whose message contains every part.
template <class Fn>
void expect_error(Fn&& f, std::initializer_list<std::string_view> parts) {
  std::string msg = error_of(f);
  for (std::string_view p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
}

// `count` floats uniform in [-1, 1) from `seed`: operands for kernels tested on raw buffers.
inline std::vector<float> random_floats(int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(gen);
  return v;
}

// Sets kiln's thread count for one scope and restores it afterwards.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_;
};

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace kiln
