// Host CPU feature checks: known and unknown LLVM names, '+'/'-' prefixes, a feature no
// CPU this runs on has, sorting, and agreement with the kernel's /proc/cpuinfo flags.
#include "kiln/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kiln {
namespace {

using Names = std::vector<std::string>;

TEST(CpuFeatures, UnknownNamesAreNotCheckable) {
  EXPECT_EQ(host_has_cpu_feature("no-such-feature"), std::nullopt);
  EXPECT_EQ(host_has_cpu_feature(""), std::nullopt);
  // The builtin's spelling is not LLVM's: kiln answers only to LLVM's names.
  EXPECT_EQ(host_has_cpu_feature("+sse2"), std::nullopt);
  EXPECT_EQ(missing_cpu_features({"no-such-feature", "+also-unknown"}), Names{});
}

TEST(CpuFeatures, EmptyListLacksNothing) {
  EXPECT_EQ(missing_cpu_features({}), Names{});
}

#if defined(__x86_64__) || defined(__i386__)

TEST(CpuFeatures, X86BaselineIsPresent) {
#if defined(__x86_64__)
  // Every x86-64 CPU has SSE and SSE2.
  EXPECT_EQ(host_has_cpu_feature("sse"), true);
  EXPECT_EQ(host_has_cpu_feature("sse2"), true);
  EXPECT_EQ(missing_cpu_features({"+sse", "+sse2", "sse2"}), Names{});
#endif
  for (const char* name : {"sse4.1", "sse4.2", "avx", "avx2", "fma", "bmi2", "avx512f", "avx512vl",
                           "avx512vnni", "vpclmulqdq", "pclmul", "gfni"})
    EXPECT_TRUE(host_has_cpu_feature(name).has_value()) << name;
}

TEST(CpuFeatures, XeonPhiOnlyFeatureIsMissing) {
  // avx512er existed only on Xeon Phi; no CPU these tests run on has it.
  std::optional<bool> er = host_has_cpu_feature("avx512er");
#if !defined(__clang__)
  ASSERT_TRUE(er.has_value());
#endif
  if (er.has_value()) {
    EXPECT_FALSE(*er);
    // '+' is stripped, unknown names dropped, order kept.
    EXPECT_EQ(missing_cpu_features({"+sse2", "+avx512er", "bogus", "+also-bogus"}),
              Names{"avx512er"});
    // A '-' entry is a feature the code was built without: never required.
    EXPECT_EQ(missing_cpu_features({"-avx512er"}), Names{});
  }
}

TEST(CpuFeatures, HostListIsSortedAndHasBaseline) {
  Names names = host_cpu_features();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(std::adjacent_find(names.begin(), names.end()) == names.end());
#if defined(__x86_64__)
  EXPECT_NE(std::find(names.begin(), names.end(), "sse2"), names.end());
#endif
  for (const std::string& name : names) EXPECT_EQ(host_has_cpu_feature(name), true) << name;
  EXPECT_EQ(std::find(names.begin(), names.end(), "avx512er"), names.end());
}

// The kernel's view of the same CPU: the first "flags" line of /proc/cpuinfo.
std::optional<Names> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    Names flags;
    for (std::string w; words >> w;) flags.push_back(w);
    return flags;
  }
  return std::nullopt;
}

TEST(CpuFeatures, Avx2AgreesWithProcCpuinfo) {
  std::optional<Names> flags = proc_cpuinfo_flags();
  if (!flags) GTEST_SKIP() << "no flags line in /proc/cpuinfo on this system";
  bool kernel_says = std::find(flags->begin(), flags->end(), "avx2") != flags->end();
  EXPECT_EQ(host_has_cpu_feature("avx2"), kernel_says);
  bool kernel_sse42 = std::find(flags->begin(), flags->end(), "sse4_2") != flags->end();
  EXPECT_EQ(host_has_cpu_feature("sse4.2"), kernel_sse42);
}

#else

TEST(CpuFeatures, NonX86ChecksNothing) {
  EXPECT_EQ(host_has_cpu_feature("avx2"), std::nullopt);
  EXPECT_EQ(host_cpu_features(), Names{});
  EXPECT_EQ(missing_cpu_features({"+avx2", "+neon"}), Names{});
}

#endif

}  // namespace
}  // namespace kiln
