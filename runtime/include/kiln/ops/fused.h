// The fusion-group op: one node that stands for several ops the compiler runs as one kernel.
// Only the fusion pass creates it; its single region holds the fused ops (isolated, like a
// control-flow body) and maps the node's operands to its results. The reference executor
// runs the region op by op, so a fused graph means exactly what the unfused one did.
#pragma once

#include <string>

#include "kiln/op.h"

namespace kiln::ops {

struct FusedAttrs : AttrsOf<FusedAttrs> {
  // What the group is: "elementwise" (every op maps element i of its operands to element i
  // of one iteration shape, broadcasting allowed) or "row" (also reductions over the last
  // dim of the iteration shape, keepdim: each row is reduced and its per-row values feed the
  // ops around them, as in softmax and layer_norm).
  std::string kind = "elementwise";
  template <class V>
  void fields(V& v) {
    v("kind", kind);
  }
};

extern OpDef fused;

}  // namespace kiln::ops
