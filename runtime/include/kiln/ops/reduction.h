// Reductions over a set of dims (all dims when `dims` is empty), with keepdim.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct ReduceAttrs : AttrsOf<ReduceAttrs> {
  Shape dims;  // empty: every dim
  bool keepdim = false;
  template <class V> void fields(V& v) { v("dims", dims), v("keepdim", keepdim); }
};
// sum: bool and integer inputs sum to int64, floating to their own dtype.
extern OpDef sum;

// The output shape of reducing `input` over `attrs` (shared by reduction infers).
Shape reduced_shape(IntList input, const ReduceAttrs& attrs, const char* op);

}  // namespace kiln::ops
