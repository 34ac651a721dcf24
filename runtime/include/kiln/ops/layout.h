// Layout ops: they move elements without computing on them (LoweringClass::Layout).
// Concatenation and the index ops; stack, split, chunk, masked_fill, tril and triu are
// composites in the frontend. Index inputs are int64; an index out of range is a
// kiln::Error naming the op, the index and the valid range.
#pragma once

#include <string>

#include "kiln/op.h"
#include "kiln/ops/view.h"  // DimAttrs

namespace kiln::ops {

// cat(tensors...): joins tensors of one dtype along DimAttrs::dim; every other dim must
// match. As in PyTorch, 1-D empty tensors (shape [0]) are skipped whatever their rank.
extern OpDef cat;

// gather(x, index): out[i][j] = x[index[i][j]][j] for dim 0 (likewise for other dims).
// index has x's rank; out has index's shape; index.size(d) <= x.size(d) for d != dim.
extern OpDef gather;
// scatter_add(x, index, src): a copy of x with src[i][j] added at x[index[i][j]][j] for
// dim 0. index, src and x share a rank; index.size(d) <= src.size(d) for every d and
// <= x.size(d) for d != dim. Duplicate indices accumulate. gather's gradient.
extern OpDef scatter_add;
struct ScatterReduceAttrs : AttrsOf<ScatterReduceAttrs> {
  int64_t dim = 0;
  std::string reduce = "sum";  // "sum" | "prod" | "mean" | "amax" | "amin" | "replace"
  bool include_self = true;
  template <class V>
  void fields(V& v) {
    v("dim", dim), v("reduce", reduce), v("include_self", include_self);
  }
};
// scatter_reduce(x, index, src): a copy of x where each src[i][j] is combined into
// x[index[i][j]][j] (dim 0 shown) by `reduce`, with scatter_add's shape rules.
// include_self = false leaves x's own value out of every position the index names (the
// first value scattered there starts the reduction). "mean" divides by the count (floor
// division for integers, as PyTorch); "amax"/"amin" propagate NaN. "replace" is PyTorch's
// scatter: the last value in index order along dim wins, on every device. Not for bool
// except "replace".
extern OpDef scatter_reduce;
// index_select(x, index): the slices x.select(dim, index[i]) stacked along dim; index is
// 1-D (or 0-d).
extern OpDef index_select;
// index_add(x, index, src): a copy of x with src.select(dim, i) added to the slice
// index[i]; duplicates accumulate. index_select's gradient.
extern OpDef index_add;

}  // namespace kiln::ops
