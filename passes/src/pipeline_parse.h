// The pipeline text "canonicalize,dce,fuse{max-ops=16}" read into passes and their options.
#pragma once

#include <string_view>
#include <vector>

#include "kiln/passes/pass.h"

namespace kiln::passes {

struct PipelineStage {
  const PassInfo* info = nullptr;
  PassOptions options;
};

// Throws kiln::Error naming the column (1-based) and what was expected there. Blank text is
// the empty pipeline.
std::vector<PipelineStage> parse_pipeline(std::string_view text);

}  // namespace kiln::passes
