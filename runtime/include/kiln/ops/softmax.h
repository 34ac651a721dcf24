// softmax and log_softmax along one dim: numerically stable primitives (the row maximum
// is subtracted before exponentiating) with fused row kernels.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct SoftmaxAttrs : AttrsOf<SoftmaxAttrs> {
  int64_t dim = -1;  // wrapped by infer; any dim of the input
  template <class V>
  void fields(V& v) {
    v("dim", dim);
  }
};
// Both take a float32/float64 x and return its shape; their vjps read only the output.
extern OpDef softmax, log_softmax;

}  // namespace kiln::ops
