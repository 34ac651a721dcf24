// FileStore: one file per key in a folder every rank sees; and PrefixStore::wait, the one
// PrefixStore method that is more than a forwarding line.
//
// A value is written to a temporary file in the same folder and renamed over the key's file,
// so a reader sees the old value, the new one or none, never a partial write. add() is a
// read-modify-write under flock() on the folder's lock file, which excludes other processes
// and, since each call opens the file anew, other threads of this one.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "distributed/posix.h"
#include "kiln/distributed/store.h"
#include "kiln/error.h"

namespace kiln::distributed {

namespace {

using posix::errno_text;
using posix::Backoff;
using posix::Fd;
using posix::parse_int;
using posix::quoted;
using Clock = std::chrono::steady_clock;

// File names keep [a-z0-9._-] of the key as they are (so `ls` stays readable) and write every
// other byte as %XX: '/' and '\0' cannot reach the file system, and upper case is escaped too
// so that keys differing only in case stay apart on case-insensitive shared file systems.
// Names are at most ~230 bytes (NAME_MAX is 255): a longer key keeps a readable head and
// ends in a 128-bit hash of the whole key. '~' is always escaped in the head, so a hashed name
// never equals a plain one. Every name starts with "k_": never ".", "..", or a temp file.
std::string file_name(const std::string& key) {
  constexpr size_t kMaxEscaped = 192;
  std::string name = "k_";
  size_t i = 0;
  for (; i < key.size() && name.size() < kMaxEscaped; ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-') {
      name += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      name += buf;
    }
  }
  if (i == key.size()) return name;
  // Two FNV-1a passes with different bases, each finished with a strong 64-bit mixer.
  auto hash = [&](uint64_t h) {
    for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
  };
  char buf[40];
  std::snprintf(buf, sizeof buf, "~%016llx%016llx",
                static_cast<unsigned long long>(hash(0xcbf29ce484222325ull)),
                static_cast<unsigned long long>(hash(0x84222325cbf29ce4ull)));
  return name + buf;
}

// A temporary name no other writer uses at the same time, even on another machine sharing
// the folder. It starts with '.', which no key's file does.
std::string temp_name() {
  static std::atomic<uint64_t> counter{0};
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  return detail::str_cat(".tmp.", host, ".", ::getpid(), ".", counter.fetch_add(1));
}

// The contents of `path`, or nullopt when it does not exist.
std::optional<std::string> read_file(const std::string& path, const std::string& key) {
  int fd_raw;
  do {
    fd_raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd_raw < 0 && errno == EINTR);
  if (fd_raw < 0) {
    const int err = errno;
    KILN_CHECK(err == ENOENT, "[FileStore] could not read key ", quoted(key), " from ", path, " (",
               errno_text(err), "). Fix: the store's folder must be readable by every rank.");
    return std::nullopt;
  }
  Fd fd(fd_raw);
  std::string out;
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      return out;
    } else if (const int err = errno; err != EINTR) {
      KILN_FAIL("[FileStore] could not read key ", quoted(key), " from ", path, " (",
                errno_text(err), "). Fix: check the file system the store lives on.");
    }
  }
}

// Writes `value` to `path` through a temporary file and rename(), so readers never see a
// partial value.
void write_file(const std::string& folder, const std::string& path, const std::string& key,
                const std::string& value) {
  const std::string temp = folder + "/" + temp_name();
  auto fail = [&](int err, const char* step) {
    ::unlink(temp.c_str());
    KILN_FAIL("[FileStore] could not write key ", quoted(key), " to ", path, ": ", step,
              " failed (", errno_text(err), "). Fix: the folder ", folder,
              " must be writable by every rank and have free space.");
  };
  int fd_raw;
  do {
    fd_raw = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  } while (fd_raw < 0 && errno == EINTR);
  if (fd_raw < 0) fail(errno, "creating a temporary file");
  Fd fd(fd_raw);
  size_t done = 0;
  while (done < value.size()) {
    const ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      fail(errno, "writing the temporary file");
    }
  }
  if (const int err = fd.close_checked(); err != 0) fail(err, "closing the temporary file");
  if (::rename(temp.c_str(), path.c_str()) != 0) fail(errno, "renaming the temporary file");
}

}  // namespace

FileStore::FileStore(std::string folder) {
  KILN_CHECK(!folder.empty(),
             "[FileStore] expected a folder, got an empty path. Fix: pass a folder every rank can "
             "see, e.g. on a shared file system.");
  std::error_code ec;
  // Absolute, so messages name the same place whatever the working folder of each rank.
  std::filesystem::path path = std::filesystem::absolute(folder, ec);
  if (ec) path = folder;
  folder_ = path.lexically_normal().string();
  while (folder_.size() > 1 && folder_.back() == '/') folder_.pop_back();
  std::filesystem::create_directories(folder_, ec);
  KILN_CHECK(
      !ec && std::filesystem::is_directory(folder_), "[FileStore] expected a folder at ", folder_,
      " (creating it when missing), but ",
      ec ? "it could not be created (" + ec.message() + ")" : std::string("it is not a folder"),
      ". Fix: pass a folder every rank may create files in.");
}

std::string FileStore::path_of(const std::string& key) const {
  return folder_ + "/" + file_name(key);
}

void FileStore::set(const std::string& key, const std::string& value) {
  write_file(folder_, path_of(key), key, value);
}

std::string FileStore::get(const std::string& key, Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string path = path_of(key);
  Backoff backoff(Milliseconds(1));
  for (;;) {
    if (std::optional<std::string> value = read_file(path, key)) return std::move(*value);
    if (Clock::now() >= deadline) break;
    backoff.sleep_until_next(deadline);
  }
  KILN_FAIL(
      "[FileStore] get(", quoted(key), ") timed out after ", timeout.count(), " ms on ", describe(),
      ": expected some rank to set the key (file ", path,
      "), but none did. Fix: check that every rank reached this point and uses the same folder (a "
      "shared file system when ranks run on several machines), or raise the timeout.");
}

std::vector<std::string> FileStore::wait(const std::vector<std::string>& keys,
                                         Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> missing = keys;
  Backoff backoff(Milliseconds(1));
  for (;;) {
    std::erase_if(missing, [&](const std::string& k) { return check(k); });
    if (missing.empty() || Clock::now() >= deadline) return missing;
    backoff.sleep_until_next(deadline);
  }
}

bool FileStore::check(const std::string& key) {
  const std::string path = path_of(key);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  const int err = errno;
  KILN_CHECK(err == ENOENT, "[FileStore] could not look for key ", quoted(key), " at ", path, " (",
             errno_text(err), "). Fix: the store's folder must be readable by every rank.");
  return false;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  const std::string lock_path = folder_ + "/.lock";
  int fd_raw;
  do {
    fd_raw = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd_raw < 0 && errno == EINTR);
  const int open_err = errno;
  KILN_CHECK(fd_raw >= 0, "[FileStore] add(", quoted(key), ", ", delta,
             "): could not open the lock file ", lock_path, " (", errno_text(open_err),
             "). Fix: the folder must be writable by every rank.");
  Fd lock(fd_raw);  // closing it releases the lock, on every path out of here
  int rc;
  do {
    rc = ::flock(lock.get(), LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  const int lock_err = errno;
  KILN_CHECK(rc == 0, "[FileStore] add(", quoted(key), ", ", delta, "): could not lock ", lock_path,
             " (", errno_text(lock_err),
             "). Fix: the file system must support flock() (NFS needs lock support enabled), or "
             "use a TcpStore.");

  const std::string path = path_of(key);
  const std::optional<std::string> text = read_file(path, key);
  const std::optional<int64_t> current = text ? parse_int(*text) : std::optional<int64_t>(0);
  KILN_CHECK(current.has_value(), "[FileStore] add(", quoted(key), ", ", delta, ") on ", describe(),
             ": expected the value to be a decimal integer, found ", quoted(*text),
             ". Fix: use add() only on keys no one set() to other text.");
  int64_t sum = 0;
  KILN_CHECK(!__builtin_add_overflow(*current, delta, &sum), "[FileStore] add(", quoted(key), ", ",
             delta, ") on ", describe(), ": ", *current, " + ", delta, " overflows int64.");
  write_file(folder_, path, key, std::to_string(sum));
  return sum;
}

std::string FileStore::describe() const {
  return "file://" + folder_;
}

std::vector<std::string> PrefixStore::wait(const std::vector<std::string>& keys,
                                           Milliseconds timeout) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const std::string& k : keys) full_keys.push_back(full(k));
  std::vector<std::string> missing = inner_->wait(full_keys, timeout);
  // Callers name keys without the prefix, so report them that way.
  const size_t strip = prefix_.size() + 1;
  for (std::string& k : missing) {
    if (k.size() >= strip && k.compare(0, strip, prefix_ + "/") == 0) k.erase(0, strip);
  }
  return missing;
}

}  // namespace kiln::distributed
