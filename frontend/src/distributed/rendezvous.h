// The first step of every process group's set-up, whatever its engine: each rank announces
// itself in the store and waits for the others, so that a rank that never came is named
// instead of the engine's own connect hanging or failing without a name.
#pragma once

#include <string>

#include "kiln/distributed/store.h"

namespace kiln::distributed {

// Returns once ranks 0..size-1 all announced themselves under "<prefix>/joined/"; throws a
// kiln::Error naming the ranks still missing after `timeout`.
void wait_for_every_rank(Store& store, const std::string& prefix, int rank, int size, Milliseconds timeout);

}  // namespace kiln::distributed
