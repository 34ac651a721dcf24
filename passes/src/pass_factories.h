// The factory of every pass, one per pass file; pass_registry.cpp lists them.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> create_canonicalize_pass(const PassOptions& options);
std::unique_ptr<Pass> create_decompose_pass(const PassOptions& options);
std::unique_ptr<Pass> create_dce_pass(const PassOptions& options);
std::unique_ptr<Pass> create_cse_pass(const PassOptions& options);
std::unique_ptr<Pass> create_fuse_pass(const PassOptions& options);
std::unique_ptr<Pass> create_specialize_pass(const PassOptions& options);

}  // namespace kiln::passes
