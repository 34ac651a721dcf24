// The on-disk kernel cache: keys, the entry file format (object + trailer), atomic writes and
// the checks that keep a damaged entry from ever reaching the JIT. Only LLVM's hashing
// headers are used here (cheap to compile); compile_kernels.cpp uses it.
#include "kiln/cpu/codegen/kernel_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "kiln/cpu/codegen/kernels.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"

namespace kiln::cpu::codegen {
namespace {

namespace fs = std::filesystem;

// The fixed-size end of an entry, after the object and the metadata text.
struct Trailer {
  char magic[8];
  uint32_t format;
  uint32_t meta_size;
  uint64_t object_size;
  uint64_t checksum;  // xxh3 of the object and the metadata
};
static_assert(sizeof(Trailer) == 32);
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'C', 'A', 'C'};

uint64_t checksum(std::string_view bytes) {
  return llvm::xxh3_64bits(llvm::StringRef(bytes.data(), bytes.size()));
}

std::string errno_text() {
  return std::strerror(errno);
}

// "key <key>\nkernel <name>\n...": what the entry says it is.
std::string metadata(const std::string& key, const std::vector<std::string>& kernels) {
  std::string out = "key " + key + "\n";
  for (const std::string& name : kernels) out += "kernel " + name + "\n";
  return out;
}

// Writes all of `bytes` to `fd`; "" or why not.
std::string write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno_text() : "short write";
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return "";
}

}  // namespace

std::string default_cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  std::string kiln = env("KILN_CACHE_DIR");
  if (kiln == "off") return "";
  if (!kiln.empty()) return kiln;
  std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/kiln";  // relative ones are ignored (XDG)
  std::string home = env("HOME");
  if (!home.empty()) return home + "/.cache/kiln";
  return "";
}

std::string kernel_cache_key(const KernelCacheKeyParts& parts) {
  llvm::SHA256 sha;
  // Length prefixes: moving text from one part into the next changes the key.
  for (std::string_view part : {parts.module_text, parts.target, parts.compiler}) {
    uint64_t size = part.size();
    sha.update(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(&size), sizeof(size)));
    sha.update(llvm::StringRef(part.data(), part.size()));
  }
  std::array<uint8_t, 32> digest = sha.final();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key;
  for (size_t i = 0; i < 16; ++i) {
    key += kHex[digest[i] >> 4];
    key += kHex[digest[i] & 15];
  }
  return key;
}

size_t default_cache_max_bytes() {
  constexpr size_t kMiB = size_t{1} << 20;
  if (const char* env = std::getenv("KILN_CACHE_MAX_MB")) {
    char* end = nullptr;
    unsigned long long mb = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return static_cast<size_t>(mb) * kMiB;
  }
  return 256 * kMiB;
}

KernelCache::KernelCache(std::string dir, size_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  if (dir_.empty() || dir_ == "off") {
    note_ = "cache disabled";
    return;
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!ec && !fs::is_directory(dir_, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) {
    note_ = "cache unwritable: cannot create directory " + dir_ + ": " + ec.message() +
            "; compiling without a cache (set KILN_CACHE_DIR to a writable directory, or to "
            "'off')";
    return;
  }
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    note_ = "cache unwritable: " + dir_ + ": " + errno_text() +
            "; compiling without a cache (set KILN_CACHE_DIR to a writable directory, or to "
            "'off')";
    return;
  }
  enabled_ = true;
}

std::string KernelCache::path(const std::string& key) const {
  return dir_ + "/" + key + ".o";
}

std::optional<KernelCacheEntry> KernelCache::load(const std::string& key,
                                                  std::string& problem) const {
  problem.clear();
  if (!enabled_) return std::nullopt;
  std::ifstream in(path(key), std::ios::binary);
  if (!in) return std::nullopt;  // no entry: a plain miss
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    problem = "unreadable: " + errno_text();
    return std::nullopt;
  }
  if (bytes.size() < sizeof(Trailer)) {
    problem = "truncated (" + std::to_string(bytes.size()) + " bytes, less than its trailer)";
    return std::nullopt;
  }
  Trailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof(Trailer), sizeof(Trailer));
  if (std::memcmp(t.magic, kMagic, sizeof(kMagic)) != 0) {
    problem = "truncated or not a kiln cache entry (no trailer at its end)";
    return std::nullopt;
  }
  if (t.format != kKernelCacheFormat) {
    problem = "format version " + std::to_string(t.format) + ", expected " +
              std::to_string(kKernelCacheFormat);
    return std::nullopt;
  }
  size_t body = bytes.size() - sizeof(Trailer);
  if (t.object_size > body || t.meta_size != body - t.object_size) {
    problem = "size mismatch (trailer says " + std::to_string(t.object_size) + " + " +
              std::to_string(t.meta_size) + " bytes, found " + std::to_string(body) + ")";
    return std::nullopt;
  }
  if (checksum(std::string_view(bytes.data(), body)) != t.checksum) {
    problem = "checksum mismatch (damaged)";
    return std::nullopt;
  }
  KernelCacheEntry entry;
  std::string_view meta(bytes.data() + t.object_size, t.meta_size);
  bool key_ok = false;
  while (!meta.empty()) {
    size_t eol = meta.find('\n');
    std::string_view line = meta.substr(0, eol);
    meta.remove_prefix(eol == std::string_view::npos ? meta.size() : eol + 1);
    if (line.starts_with("key "))
      key_ok = line.substr(4) == key;
    else if (line.starts_with("kernel "))
      entry.kernels.emplace_back(line.substr(7));
  }
  if (!key_ok) {
    problem = "written for another key";
    return std::nullopt;
  }
  bytes.resize(t.object_size);
  entry.object = std::move(bytes);
  std::error_code ec;  // used now: the last to be evicted (best effort)
  fs::last_write_time(path(key), fs::file_time_type::clock::now(), ec);
  return entry;
}

std::string KernelCache::store(const std::string& key, const KernelCacheEntry& entry) const {
  if (!enabled_) return note_;
  for (const std::string& name : entry.kernels)
    if (name.find('\n') != std::string::npos) return "kernel name with a line break";
  std::string meta = metadata(key, entry.kernels);
  std::string bytes = entry.object + meta;
  Trailer t;
  std::memcpy(t.magic, kMagic, sizeof(kMagic));
  t.format = kKernelCacheFormat;
  t.meta_size = static_cast<uint32_t>(meta.size());
  t.object_size = entry.object.size();
  t.checksum = checksum(bytes);
  bytes.append(reinterpret_cast<const char*>(&t), sizeof(t));

  // A unique temporary in the same directory (same file system), renamed into place: rename
  // replaces atomically, so readers see the old entry, no entry, or the whole new one.
  std::string tmp = path(key) + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return "cannot create a file in " + dir_ + ": " + errno_text();
  std::string error = write_all(fd, bytes);
  if (::close(fd) != 0 && error.empty()) error = errno_text();
  if (error.empty() && ::rename(tmp.c_str(), path(key).c_str()) != 0) error = errno_text();
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    return "cannot write " + path(key) + ": " + error;
  }
  return "";
}

int KernelCache::evict(const std::string& keep) const {
  if (!enabled_) return 0;
  struct File {
    fs::path path;
    uintmax_t size;
    fs::file_time_type used;
  };
  std::vector<File> files;
  uintmax_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".o") continue;  // temporaries of other writers stay
    std::error_code size_ec, time_ec;
    uintmax_t size = fs::file_size(p, size_ec);
    fs::file_time_type used = fs::last_write_time(p, time_ec);
    if (size_ec || time_ec) continue;
    files.push_back({p, size, used});
    total += size;
  }
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.used < b.used; });
  int deleted = 0;
  const fs::path kept = path(keep);
  for (const File& f : files) {
    if (total <= max_bytes_) break;
    if (f.path == kept) continue;
    std::error_code remove_ec;
    if (fs::remove(f.path, remove_ec)) {
      total -= f.size;
      ++deleted;
    }
  }
  return deleted;
}

}  // namespace kiln::cpu::codegen
