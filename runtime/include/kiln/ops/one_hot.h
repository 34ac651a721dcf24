// one_hot: int64 class indices -> int64 one-hot vectors along a new last dim.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct OneHotAttrs : AttrsOf<OneHotAttrs> {
  int64_t num_classes = 0;  // resolved by the frontend (-1 there means max index + 1)
  template <class V>
  void fields(V& v) {
    v("num_classes", num_classes);
  }
};
// one_hot(indices int64 [*]) -> int64 [*, num_classes]. Not differentiable.
extern OpDef one_hot;

}  // namespace kiln::ops
