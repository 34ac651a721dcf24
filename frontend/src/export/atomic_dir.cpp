// Export's atomic writes: a scratch directory moved into place in one step (atomic_dir.h).
#include "atomic_dir.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "kiln/artifact/manifest.h"
#include "kiln/error.h"
#include "kiln/serialize/durable_files.h"

namespace kiln::detail {

namespace fs = std::filesystem;

namespace {

// Moves the finished temporary directory to `dir`, replacing an artifact already there.
// Everything in it is flushed to disk first. An existing artifact is exchanged with the new
// one in one step (renameat2), so `dir` is at every moment the old artifact or the new one,
// never absent; where the file system cannot exchange, the old one is renamed aside first
// (then `dir` is briefly absent, never a mix). The parent directory is flushed last.
void move_into_place(const fs::path& tmp, const fs::path& dir) {
  durable::fsync_tree(tmp.string(), "[export]");
  fs::path parent = fs::absolute(dir).parent_path();
  if (fs::exists(dir)) {
    bool replaceable =
        fs::is_directory(dir) && (fs::is_empty(dir) || fs::exists(dir / artifact::kManifestFile));
    KILN_CHECK(replaceable, "[export] expected '", dir.string(),
               "' to be absent, empty or an earlier export, found a ",
               fs::is_directory(dir) ? "directory without manifest.json" : "file",
               ". Fix: choose another output directory; export never deletes other files.");
    if (durable::exchange(tmp.string(), dir.string())) {
      durable::fsync_path(parent.string(), "[export]");
      fs::remove_all(tmp);  // now the old artifact
      return;
    }
    fs::path old = scratch_path(dir, "old");
    fs::rename(dir, old);
    fs::rename(tmp, dir);
    durable::fsync_path(parent.string(), "[export]");
    fs::remove_all(old);
    return;
  }
  fs::rename(tmp, dir);
  durable::fsync_path(parent.string(), "[export]");
}

}  // namespace

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  KILN_CHECK(!f.fail(), "[export] expected to write ", path.string(),
             ", failed: ", std::strerror(errno), ". Fix: check the disk space and permissions.");
}

fs::path scratch_path(const fs::path& dir, const char* what) {
  return durable::scratch_name(dir.string(), std::string(".") + what + "-");
}

void write_dir_atomically(const fs::path& target,
                          const std::function<void(const fs::path& scratch)>& fill) {
  // Scratch directories of exports to this target that were killed midway.
  durable::remove_stale_scratch(target.string(), ".tmp-");
  durable::remove_stale_scratch(target.string(), ".old-");
  fs::path tmp = scratch_path(target, "tmp");
  fs::create_directories(tmp);
  try {
    fill(tmp);
    move_into_place(tmp, target);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

}  // namespace kiln::detail
