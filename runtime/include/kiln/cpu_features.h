// Which instruction-set features this process's CPU has, by LLVM's feature names, so the
// runtime can refuse an artifact whose kernels need one the host lacks (instead of dying
// with SIGILL in the middle of a call).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Whether this CPU (and the OS, for the AVX families that need it to save their registers)
// supports the feature LLVM calls `llvm_feature` ("avx2", "sse4.2", "avx512f"; no '+').
// nullopt when kiln does not know how to check that name on this architecture.
std::optional<bool> host_has_cpu_feature(std::string_view llvm_feature);

// Of `features` (LLVM names as a target feature string lists them, each may start with
// '+'), the ones the host lacks, in their given order without the '+'. Names kiln cannot
// check are ignored, and so are entries starting with '-' (features the code was compiled
// without, which the host need not have).
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& features);

// The checkable features this host has, LLVM names, sorted (for messages and manifests).
std::vector<std::string> host_cpu_features();

}  // namespace kiln
