// The on-disk cache of compiled kernel modules: machine code kept between processes, so a
// process that compiles a graph another one already compiled runs neither MLIR's lowering
// nor LLVM. compile_kernels() uses it when CodegenOptions::cache_dir is set; it is plain
// C++ (no MLIR or LLVM type) so tests can check keys and damaged entries directly.
//
// An entry is one file, <dir>/<key>.o: the module's relocatable object file followed by a
// trailer (kernel names, the key, sizes, a format version and a checksum). ELF readers ignore
// bytes past the section headers, so `objdump -d <key>.o` still works on an entry. Entries
// are written to a temporary file in the same directory and renamed, so no reader ever sees
// half of one; a damaged or foreign entry is reported and never trusted.
//
// The directory is kept under a size limit (KILN_CACHE_MAX_MB, default 256 MiB): after a
// write, the least recently used entries (a hit refreshes an entry's modification time) are
// deleted until the rest fit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cpu::codegen {

// Everything the machine code of a module depends on.
struct KernelCacheKeyParts {
  std::string_view module_text;  // the kernels' MLIR before lowering
  std::string_view target;       // triple, CPU name and the full LLVM feature string
  // kiln's version, the code generator's revision, LLVM's version, the pass pipeline and the
  // options that change the code.
  std::string_view compiler;
};

// 32 hex digits (128 bits of SHA-256 over the parts, each length-prefixed).
std::string kernel_cache_key(const KernelCacheKeyParts& parts);

struct KernelCacheEntry {
  std::string object;                // the relocatable object file
  std::vector<std::string> kernels;  // the kernel symbols it defines, in order
};

// The cache's size limit: $KILN_CACHE_MAX_MB mebibytes, else 256 MiB.
size_t default_cache_max_bytes();

class KernelCache {
 public:
  // A cache in `dir`, created if missing, holding at most about `max_bytes` of entries. Never
  // throws: a directory that cannot be created gives a disabled cache whose note() says why.
  explicit KernelCache(std::string dir, size_t max_bytes = default_cache_max_bytes());

  bool enabled() const { return enabled_; }
  const std::string& dir() const { return dir_; }
  // Why the cache is disabled ("cache unwritable: ..."); empty while enabled.
  const std::string& note() const { return note_; }
  std::string path(const std::string& key) const;  // <dir>/<key>.o

  // The entry for `key`, or nullopt: `problem` is then empty when there is none, or says what
  // is wrong with the file (truncated, checksum mismatch, another format version or key). A
  // hit marks the entry as used now (its modification time), for evict().
  std::optional<KernelCacheEntry> load(const std::string& key, std::string& problem) const;
  // Writes the entry atomically (temporary file + rename; concurrent writers of one key are
  // fine, the last rename wins). Returns "" or why it could not be written.
  std::string store(const std::string& key, const KernelCacheEntry& entry) const;
  // Deletes the least recently used entries (oldest modification time first), never `keep`,
  // until the entries fit max_bytes. Best effort: entries another process removes or holds
  // are skipped. Returns how many it deleted.
  int evict(const std::string& keep) const;

 private:
  std::string dir_;
  size_t max_bytes_ = 0;
  bool enabled_ = false;
  std::string note_;
};

// Bumped whenever the entry layout changes: entries of another version are recompiled.
inline constexpr unsigned kKernelCacheFormat = 1;

}  // namespace kiln::cpu::codegen
