// The target record: the CPU an artifact's kernels were compiled for, written into each
// kernel library as an ELF section at export. The loader reads it from the file before it
// loads any code, so the features the code needs are known from the code itself, not only
// from the manifest's editable list.
#pragma once

#include <string>
#include <string_view>

#include "kiln/artifact/manifest.h"

namespace kiln::artifact {

// The section's name. It is not allocated: the dynamic loader never maps it; kiln_rt reads
// it from the file.
inline constexpr const char* kTargetSection = ".kiln_target";

// The record's bytes: "kiln-target 1\narch x86_64\ncpu znver5\nfeatures +avx,+avx2,...\n".
std::string target_record(const Target& target);

// An assembly source (for the C compiler driver) that defines the section holding
// target_record(target). Throws kiln::Error when a name holds characters outside
// [A-Za-z0-9._+-] (no LLVM CPU or feature name does).
std::string target_record_assembly(const Target& target);

// Parses a record; throws kiln::Error naming `origin` when it is malformed.
Target parse_target_record(std::string_view bytes, const std::string& origin);

}  // namespace kiln::artifact
