// Host CPU feature checks through the compiler's __builtin_cpu_supports, keyed by LLVM's
// feature names (the names an artifact's manifest records its kernels' target features in).
#include "kiln/cpu_features.h"

#include <algorithm>
#include <span>

namespace kiln {

namespace {

struct CpuFeature {
  std::string_view llvm_name;
  bool present;
};

#if defined(__x86_64__) || defined(__i386__)

// __builtin_cpu_supports only takes string literals, so the table is built by a macro. The
// builtin's names match LLVM's for every feature here but one (LLVM "cx16", GCC "cmpxchg16b").
#define KILN_CPU_FEATURE(llvm, builtin)                      \
  CpuFeature {                                               \
    llvm, static_cast<bool>(__builtin_cpu_supports(builtin)) \
  }

std::vector<CpuFeature> detect_features() {
  // Safe to call more than once; it fills the data the builtin reads even when this runs
  // before the runtime library's own constructors.
  __builtin_cpu_init();
  std::vector<CpuFeature> table = {
      KILN_CPU_FEATURE("sse", "sse"),
      KILN_CPU_FEATURE("sse2", "sse2"),
      KILN_CPU_FEATURE("sse3", "sse3"),
      KILN_CPU_FEATURE("ssse3", "ssse3"),
      KILN_CPU_FEATURE("sse4.1", "sse4.1"),
      KILN_CPU_FEATURE("sse4.2", "sse4.2"),
      KILN_CPU_FEATURE("sse4a", "sse4a"),
      KILN_CPU_FEATURE("popcnt", "popcnt"),
      KILN_CPU_FEATURE("aes", "aes"),
      KILN_CPU_FEATURE("pclmul", "pclmul"),
      KILN_CPU_FEATURE("avx", "avx"),
      KILN_CPU_FEATURE("avx2", "avx2"),
      KILN_CPU_FEATURE("fma", "fma"),
      KILN_CPU_FEATURE("fma4", "fma4"),
      KILN_CPU_FEATURE("xop", "xop"),
      KILN_CPU_FEATURE("bmi", "bmi"),
      KILN_CPU_FEATURE("bmi2", "bmi2"),
      KILN_CPU_FEATURE("avx512f", "avx512f"),
      KILN_CPU_FEATURE("avx512vl", "avx512vl"),
      KILN_CPU_FEATURE("avx512bw", "avx512bw"),
      KILN_CPU_FEATURE("avx512dq", "avx512dq"),
      KILN_CPU_FEATURE("avx512cd", "avx512cd"),
      KILN_CPU_FEATURE("avx512vnni", "avx512vnni"),
      KILN_CPU_FEATURE("avx512bf16", "avx512bf16"),
      KILN_CPU_FEATURE("avx512vbmi", "avx512vbmi"),
      KILN_CPU_FEATURE("avx512vbmi2", "avx512vbmi2"),
      KILN_CPU_FEATURE("avx512ifma", "avx512ifma"),
      KILN_CPU_FEATURE("avx512bitalg", "avx512bitalg"),
      KILN_CPU_FEATURE("avx512vpopcntdq", "avx512vpopcntdq"),
      KILN_CPU_FEATURE("gfni", "gfni"),
      KILN_CPU_FEATURE("vpclmulqdq", "vpclmulqdq"),
  };
#if !defined(__clang__)
  // Names GCC's builtin accepts but clang's does not in every version kiln builds with
  // (clang 14 lacks these; clang 19 dropped the Xeon Phi-only avx512er).
  std::vector<CpuFeature> gcc_only = {
      KILN_CPU_FEATURE("f16c", "f16c"),         KILN_CPU_FEATURE("avx512fp16", "avx512fp16"),
      KILN_CPU_FEATURE("avx512er", "avx512er"), KILN_CPU_FEATURE("avxvnni", "avxvnni"),
      KILN_CPU_FEATURE("vaes", "vaes"),         KILN_CPU_FEATURE("sha", "sha"),
      KILN_CPU_FEATURE("lzcnt", "lzcnt"),       KILN_CPU_FEATURE("movbe", "movbe"),
      KILN_CPU_FEATURE("adx", "adx"),           KILN_CPU_FEATURE("rdrnd", "rdrnd"),
      KILN_CPU_FEATURE("rdseed", "rdseed"),     KILN_CPU_FEATURE("cx16", "cmpxchg16b"),
  };
  table.insert(table.end(), gcc_only.begin(), gcc_only.end());
#endif
  return table;
}

#undef KILN_CPU_FEATURE

#else

// Other architectures: kiln checks no names there yet, so every query answers nullopt.
std::vector<CpuFeature> detect_features() {
  return {};
}

#endif

// Detected once: the CPU does not change under a running process.
std::span<const CpuFeature> host_features() {
  static const std::vector<CpuFeature> table = detect_features();
  return table;
}

}  // namespace

std::optional<bool> host_has_cpu_feature(std::string_view llvm_feature) {
  for (const CpuFeature& f : host_features())
    if (f.llvm_name == llvm_feature) return f.present;
  return std::nullopt;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& features) {
  std::vector<std::string> missing;
  for (std::string_view name : features) {
    if (name.starts_with('-')) continue;
    if (name.starts_with('+')) name.remove_prefix(1);
    if (host_has_cpu_feature(name) == false) missing.emplace_back(name);
  }
  return missing;
}

std::vector<std::string> host_cpu_features() {
  std::vector<std::string> names;
  for (const CpuFeature& f : host_features())
    if (f.present) names.emplace_back(f.llvm_name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kiln
