// Replays every committed fuzz input (tests/fuzz/corpus/ and tests/fuzz/regressions/) through
// every fuzz target in the regular build: a crash that fuzzing once found stays fixed on every
// ./run.sh test, with or without clang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {
namespace {

namespace fs = std::filesystem;

// tests/fuzz in the source tree (ctest sets KILN_TEST_DATA; a direct run finds the folder
// from the source or build dir).
fs::path fuzz_dir() {
  std::vector<fs::path> candidates;
  if (const char* data = std::getenv("KILN_TEST_DATA"))
    candidates.push_back(fs::path(data) / ".." / "fuzz");
  for (const char* up : {"", "../", "../../"}) candidates.push_back(fs::path(up) / "tests/fuzz");
  for (const fs::path& dir : candidates)
    if (fs::is_directory(dir / "corpus")) return dir;
  return {};
}

// Every file under corpus/ and regressions/, in a stable order.
std::vector<fs::path> committed_inputs(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const char* sub : {"corpus", "regressions"}) {
    if (!fs::is_directory(dir / sub)) continue;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir / sub))
      if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(FuzzCorpus, EveryCommittedInputRunsThroughEveryTarget) {
  const fs::path dir = fuzz_dir();
  ASSERT_FALSE(dir.empty()) << "cannot find tests/fuzz/corpus: run from the source or build "
                               "directory, or set KILN_TEST_DATA=<source>/tests/data";
  const std::vector<fs::path> inputs = committed_inputs(dir);
  // Every target has seeds of its own, or it is not being replayed at all.
  for (const FuzzTarget& target : kFuzzTargets)
    EXPECT_TRUE(fs::is_directory(dir / "corpus" / target.name) &&
                !fs::is_empty(dir / "corpus" / target.name))
        << "no seeds for the fuzz target " << target.name << " in " << (dir / "corpus").string()
        << ". Fix: run tests/fuzz/make_seeds.py.";
  for (const fs::path& path : inputs) {
    const std::vector<uint8_t> bytes = read_file(path);
    // Inputs also cross over: a safetensors seed must be refused cleanly by the IR parser.
    for (const FuzzTarget& target : kFuzzTargets) {
      SCOPED_TRACE(std::string(target.name) + " <- " + path.string());
      try {
        EXPECT_EQ(target.run(bytes.data(), bytes.size()), 0);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "the fuzz target " << target.name << " let an exception escape for "
                      << path.string() << ": " << e.what()
                      << "\nFix: the reader must refuse bad input with a kiln::Error, and "
                         "what it accepts must round-trip.";
      }
    }
  }
  EXPECT_GT(inputs.size(), 100u) << "the committed fuzz corpus is missing files";
}

}  // namespace
}  // namespace kiln::fuzz
