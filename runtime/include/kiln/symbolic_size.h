// Telling a symbolic size from a number. A traced graph stores symbol sk as a sentinel prime
// and a size computed from symbols as their product (kiln/ir/symbols.h has the encoding:
// factoring, text form, substitution). The runtime needs only to recognize one, so that an
// op's infer can accept what only a symbolic size may do: a slice end beyond a static dim
// (`pos[:, :x.size(1)]`), which the graph then bounds (ir::SizeBound).
#pragma once

#include <cstdint>

namespace kiln {

inline constexpr int kMaxSymbolicSizes = 12;

// The sentinel of symbol k (0 <= k < kMaxSymbolicSizes): the main set, or the disjoint set
// the tracer's validation trace uses.
int64_t symbol_sentinel(int k, bool alternate);

// True when v is a positive multiple of a sentinel of either set.
bool holds_symbolic_size(int64_t v);

}  // namespace kiln
