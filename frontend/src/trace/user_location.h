// Where in the user's code the current operation comes from: the innermost stack frame
// outside kiln's own sources, read from the debug line tables (kiln builds with -g1).
#pragma once

#include <string_view>

#include "kiln/ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::detail {

// The user's frame that led to this call; unknown (line 0) when no frame outside kiln has
// line information (code built without -g, or kiln built without libbacktrace).
ir::Location user_location();
// A std::source_location made by a default argument: the user's line when it lies outside
// kiln, otherwise (a call made by kiln itself) the user's frame from the stack.
ir::Location user_location(SourceLoc loc);
// True for kiln's implementation files (runtime/, ir/, backends/, frontend/src/ except the
// built-in models, frontend/include/) and system headers.
bool is_kiln_internal(std::string_view file);

}  // namespace kiln::detail
