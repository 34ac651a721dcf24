// Contractions. matmul is the primitive: 2-D x 2-D, or batched (rank >= 3 on either side)
// with broadcast batch dims. The frontend maps 1-D operands, linear, bmm and addmm to it.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

extern OpDef matmul;

}  // namespace kiln::ops
