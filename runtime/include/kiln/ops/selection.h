// The selection ops, whose natural output size depends on the data: masked_select (the
// elements where a mask is true) and nonzero (the coordinates of the nonzero elements). The
// op takes the size as an attribute, so shapes stay known before any data exists: the
// frontend counts first (a host read, a graph break under compile) or takes a bound from the
// caller (JAX's size=); results shorter than the size are padded with the fill, longer ones
// cut. Both run through their eager kernels in compiled graphs (LoweringClass::Opaque).
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct SelectionAttrs : AttrsOf<SelectionAttrs> {
  int64_t size = 0;   // the output's length
  double fill = 0;    // the value of positions past the selected ones
  template <class V>
  void fields(V& v) {
    v("size", size), v("fill", fill);
  }
};

// masked_select(x, mask bool): x and mask of one shape -> [size], x's elements where mask is
// true, in row-major order. Differentiable in x.
extern OpDef masked_select;
// nonzero(x) -> int64 [size, x.dim()]: the coordinates of x's nonzero (true) elements in
// row-major order. Not differentiable.
extern OpDef nonzero;

}  // namespace kiln::ops
