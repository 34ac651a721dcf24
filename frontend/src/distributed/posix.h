// Small helpers the stores and the launcher share: an owned file descriptor, errno as text,
// strict integer parsing, keys quoted for messages, and the stores' polling backoff.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace kiln::distributed::posix {

// Owns one file descriptor; closing it also drops any flock() taken through it.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0 && fd_ != fd) ::close(fd_);
    fd_ = fd;
  }
  // Closes now and returns close()'s errno (0 on success): a network file system may report
  // a failed write only here.
  int close_checked() {
    const int rc = ::close(release());
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
};

// strerrordesc_np: thread-safe, unlike strerror.
inline std::string errno_text(int err) {
  const char* text = strerrordesc_np(err);
  return text ? text : "error " + std::to_string(err);
}

// The whole of `text` as a decimal int64, or nothing.
inline std::optional<int64_t> parse_int(const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return v;
}

// A key as it appears in messages: printable, quoted, at most 200 bytes of it.
inline std::string quoted(const std::string& key) {
  std::string out = "\"";
  for (size_t i = 0; i < key.size() && i < 200; ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (key.size() > 200) out += "...";
  return out + "\"";
}

// Sleeps that start short (a key written a moment later is seen at once) and double up to
// 50 ms, so that many waiting ranks do not flood a store's server or file system.
class Backoff {
 public:
  explicit Backoff(std::chrono::milliseconds first) : step_(first) {}
  // Sleeps for the next interval, never past `deadline`.
  void sleep_until_next(std::chrono::steady_clock::time_point deadline) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(step_, deadline - now));
    step_ = std::min(step_ * 2, std::chrono::milliseconds(50));
  }

 private:
  std::chrono::milliseconds step_;
};

}  // namespace kiln::distributed::posix
