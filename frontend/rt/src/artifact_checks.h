// The manifest held to what it cannot rewrite without detection: the graphs (signature and
// symbol ranges), the weights' record of the ranges, and each kernel library's record of
// the CPU it was compiled for. A manifest edited and then re-hashed is refused here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/artifact/manifest.h"
#include "kiln/ir/graph.h"

namespace kiln::rt {

// Refuses a manifest whose inputs, outputs, "symbols" or per-graph ranges differ from what
// `graphs` (in the manifest's order) and the weights' metadata say, naming the field, both
// values and the fix.
void check_signature(const artifact::Manifest& m, const std::vector<const ir::Graph*>& graphs,
                     const std::map<std::string, std::string>& weights_metadata,
                     const std::string& dir);

// Reads the target record of the kernel library at `library` (before anything loads it) and
// refuses a library without one, or one whose architecture, CPU or features differ from the
// manifest's "target" (which the host was checked against).
void check_kernel_target(const artifact::Manifest& m, const std::string& library,
                         const std::string& dir);

}  // namespace kiln::rt
