// What kiln's writers (checkpoints, exported artifacts) share to leave a complete file or
// directory at its path, or the previous one, across crashes and kills: fsync of what was
// written, an atomic exchange of two directories, removal of the scratch names that killed
// writers left behind, and a check that a path can be written before the work that
// produces its contents.
#pragma once

#include <string>

namespace kiln::durable {

// Flushes a file, or a directory's entries, to the disk. `what` names the writer in the
// error ("[export]"). Directories on file systems that cannot fsync them are skipped.
void fsync_path(const std::string& path, const char* what);
// fsync_path on every regular file under `dir`, then on every directory, deepest first.
void fsync_tree(const std::string& dir, const char* what);

// Swaps two existing paths in one step (Linux renameat2 RENAME_EXCHANGE): there is no
// moment at which either name is missing. False when the file system cannot (the caller
// then falls back to two renames).
bool exchange(const std::string& a, const std::string& b);

// The scratch name "<target><infix><pid>-<n>" a writer uses beside its target (infix, e.g.
// ".tmp-"), unique in this process.
std::string scratch_name(const std::string& target, const std::string& infix);
// Removes, beside `target`, the scratch names "<target><infix><pid>-<n>" of processes that
// no longer run (a writer killed mid-save); a live writer's are left alone. Returns how
// many were removed.
int remove_stale_scratch(const std::string& target, const std::string& infix);

// Throws a kiln::Error naming `what` (the flag, e.g. "--save") unless `path` can be written
// as a file: its directory exists and is writable and `path` is not a directory. Checked
// before long work (training) whose result would otherwise be lost.
void check_writable_file(const std::string& path, const char* what);

}  // namespace kiln::durable
