// Durable writes shared by checkpoints and exports (durable_files.h).
#include "kiln/serialize/durable_files.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "kiln/error.h"

namespace kiln::durable {

namespace fs = std::filesystem;

void fsync_path(const std::string& path, const char* what) {
  const bool directory = fs::is_directory(path);
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  KILN_CHECK(fd >= 0, what, " cannot open '", path, "' to flush it to disk: ", std::strerror(errno),
             ".");
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL): the files themselves are flushed.
  KILN_CHECK(rc == 0 || (directory && (saved == EINVAL || saved == EBADF)), what, " cannot flush '",
             path, "' to disk: ", std::strerror(saved),
             ". Fix: check the disk (space, errors); the previous version is unchanged.");
}

void fsync_tree(const std::string& dir, const char* what) {
  std::vector<std::string> directories{dir};
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) fsync_path(entry.path().string(), what);
    if (entry.is_directory()) directories.push_back(entry.path().string());
  }
  for (auto it = directories.rbegin(); it != directories.rend(); ++it) fsync_path(*it, what);
}

bool exchange(const std::string& a, const std::string& b) {
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
}

std::string scratch_name(const std::string& target, const std::string& infix) {
  static std::atomic<uint64_t> counter{0};
  return target + infix + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

int remove_stale_scratch(const std::string& target, const std::string& infix) {
  const fs::path t(target);
  const fs::path dir = t.parent_path().empty() ? fs::path(".") : t.parent_path();
  const std::string prefix = t.filename().string() + infix;
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>-<n>": digits, a dash, digits.
    const std::string rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || dash + 1 == rest.size() ||
        rest.find_first_not_of("0123456789-") != std::string::npos)
      continue;
    const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    fs::remove_all(entry.path(), ec);
    removed += !ec;
  }
  return removed;
}

void check_writable_file(const std::string& path, const char* what) {
  KILN_CHECK(!path.empty(), what, " expected a file path, got an empty string.");
  const fs::path p(path);
  KILN_CHECK(!fs::is_directory(p), what, " '", path,
             "' is a directory. Fix: name a file in it, e.g. ", (p / "model.safetensors").string(),
             ".");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  KILN_CHECK(fs::is_directory(dir), what, " '", path, "': the directory '", dir.string(),
             "' does not exist. Fix: create it first (mkdir -p ", dir.string(),
             ") or choose another path.");
  KILN_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, what, " '", path, "': the directory '",
             dir.string(), "' is not writable (", std::strerror(errno),
             "). Fix: choose a directory you can write to.");
}

}  // namespace kiln::durable
