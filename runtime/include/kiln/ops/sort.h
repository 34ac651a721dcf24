// sort and topk: the values of each line along a dim in order, and the positions in the line
// they came from (int64); searchsorted: where values go in sorted lines.
//
// The order is total and the same on every device: NaN ranks above every number (last in
// ascending order, first in descending order, as in PyTorch), and equal values keep their
// order in the line, so a sort is always stable and the CPU and GPU agree on the indices.
// Both run through their eager kernels in compiled graphs (LoweringClass::Opaque).
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct SortAttrs : AttrsOf<SortAttrs> {
  int64_t dim = -1;
  bool descending = false;
  template <class V>
  void fields(V& v) {
    v("dim", dim), v("descending", descending);
  }
};
// sort(x) -> (values, indices): every line along dim, reordered.
extern OpDef sort;

struct TopkAttrs : AttrsOf<TopkAttrs> {
  int64_t k = 1;
  int64_t dim = -1;
  bool largest = true;
  template <class V>
  void fields(V& v) {
    v("k", k), v("dim", dim), v("largest", largest);
  }
};
// topk(x) -> (values, indices): the k largest (or smallest) of every line along dim, in
// order (largest first, or smallest first). 0 <= k <= the line's length.
extern OpDef topk;

struct SearchSortedAttrs : AttrsOf<SearchSortedAttrs> {
  bool right = false;
  template <class V>
  void fields(V& v) {
    v("right", right);
  }
};
// searchsorted(sorted_sequence [..., M], values [..., N]) -> int64 [..., N]: for each value,
// the position in its line of the sorted sequence where it would go to keep the line sorted:
// the count of the line's elements below it (right = false: the first such place) or not
// above it (right = true: the last). A 1-D sequence serves values of any shape; an N-D one
// needs values with its leading dims. The sequence is ordered as sort orders it (NaN last);
// it is not checked to be sorted. Not differentiable.
extern OpDef searchsorted;

}  // namespace kiln::ops
