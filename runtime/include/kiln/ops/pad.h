// pad: pads (or, with negative amounts, crops) the last dims of a tensor. Modes: constant,
// reflect, replicate, circular. pad_backward folds a gradient of the padded shape back
// onto the input for the non-constant modes (the constant mode's vjp is a negative pad).
#pragma once

#include <string>

#include "kiln/op.h"

namespace kiln::ops {

struct PadAttrs : AttrsOf<PadAttrs> {
  // PyTorch's order: (left, right) of the last dim first, then of the dim before it, ...
  Shape pad;
  std::string mode = "constant";  // "constant" | "reflect" | "replicate" | "circular"
  double value = 0;               // the fill of constant mode
  template <class V>
  void fields(V& v) {
    v("pad", pad), v("mode", mode), v("value", value);
  }
};
extern OpDef pad;
// pad_backward(grad of the padded shape) -> the input's shape: each input element receives
// the gradients of every output element that reads it. Not for constant mode.
extern OpDef pad_backward;

// The source index that output position `o` of a padded dim reads, for an input of size
// `n` padded by `left` (reflect, replicate, circular); -1 for constant mode outside it.
int64_t pad_source_index(int64_t o, int64_t n, int64_t left, const std::string& mode);

}  // namespace kiln::ops
