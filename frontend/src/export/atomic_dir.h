// Export's atomic writes: an artifact directory appears complete or not at all. Its files are
// written into a scratch directory beside the target, flushed to disk, and moved into place
// in one step; a failure anywhere removes the scratch directory and leaves the target as it
// was.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace kiln::detail {

// Writes `bytes` to `path` (replacing it); throws naming the path when the write fails.
void write_file(const std::filesystem::path& path, const std::string& bytes);

// A name beside `dir` that no other export (thread or process) uses at the same time.
std::filesystem::path scratch_path(const std::filesystem::path& dir, const char* what);

// Runs `fill` on a fresh scratch directory beside `target`, then moves that directory to
// `target`, replacing an earlier artifact there (a directory holding manifest.json) or an
// empty directory; anything else at `target` is refused. Scratch directories that killed
// exports to the same target left behind are removed first.
void write_dir_atomically(const std::filesystem::path& target,
                          const std::function<void(const std::filesystem::path& scratch)>& fill);

}  // namespace kiln::detail
