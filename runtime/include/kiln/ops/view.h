// View ops: results alias their input's storage (LoweringClass::View), plus the two
// copies that materialize a view (clone) or write one tensor into another (copy_).
#pragma once

#include <optional>

#include "kiln/op.h"

namespace kiln::ops {

struct ShapeAttrs : AttrsOf<ShapeAttrs> {
  Shape shape;
  template <class V> void fields(V& v) { v("shape", shape); }
};
// Strides that read a tensor of `sizes`/`strides` as `shape` without copying, if any.
std::optional<Shape> view_strides(IntList sizes, IntList strides, IntList shape);

// view: same elements, new shape; requires strides compatible with the new shape.
extern OpDef view;
// expand: broadcast size-1 dims (and new leading dims) without copying.
extern OpDef expand;

struct PermuteAttrs : AttrsOf<PermuteAttrs> {
  Shape dims;
  template <class V> void fields(V& v) { v("dims", dims); }
};
extern OpDef permute;

struct SliceAttrs : AttrsOf<SliceAttrs> {
  // start/end already clamped by the frontend. In a traced graph, end may be a symbolic size
  // beyond a static dim (`pos[:, :x.size(1)]`): the graph bounds the symbol by the dim
  // (ir::SizeBound), and kernels check the substituted end (check_slice_fits).
  int64_t dim = 0, start = 0, end = 0, step = 1;
  template <class V> void fields(V& v) { v("dim", dim), v("start", start), v("end", end), v("step", step); }
};
extern OpDef slice;
// Throws kiln::Error unless [start, end) lies within a dim of `size` (a slice or
// slice_scatter kernel's check that a substituted symbolic end fits).
void check_slice_fits(const SliceAttrs& a, int64_t size, const char* op);

struct SelectAttrs : AttrsOf<SelectAttrs> {
  int64_t dim = 0, index = 0;
  template <class V> void fields(V& v) { v("dim", dim), v("index", index); }
};
extern OpDef select;
// unbind(x) -> x.select(dim, 0), ..., x.select(dim, n - 1): every slice along DimAttrs::dim
// as a view, from one op, so autograd sees one node whose gradient stacks the slices'
// gradients; n selects would give each slice a full-size gradient (n² work for a scan over
// a long sequence). The dim's size must be known (not symbolic): it is the output count.
extern OpDef unbind;

struct DimsAttrs : AttrsOf<DimsAttrs> {
  Shape dims;
  template <class V> void fields(V& v) { v("dims", dims); }
};
extern OpDef squeeze;  // removes the listed size-1 dims (all size-1 dims when empty)

struct DimAttrs : AttrsOf<DimAttrs> {
  int64_t dim = 0;
  template <class V> void fields(V& v) { v("dim", dim); }
};
extern OpDef unsqueeze;

struct AsStridedAttrs : AttrsOf<AsStridedAttrs> {
  Shape sizes, strides;
  int64_t offset = 0;
  template <class V> void fields(V& v) { v("sizes", sizes), v("strides", strides), v("offset", offset); }
};
extern OpDef as_strided;

// slice_scatter(base, src): a copy of base whose slice (SliceAttrs) holds src. It is
// slice's gradient (and select's, with a length-1 slice).
extern OpDef slice_scatter;

// detach: the same data, cut from autograd (not differentiable). Eager code detaches
// without dispatch; a trace records this op so compiled runs stop gradients where eager
// does (detach(), results computed under NoGradGuard).
extern OpDef detach;

// clone: a contiguous copy. copy_(dst, src) is clone's kernel writing into dst.
extern OpDef clone;

}  // namespace kiln::ops
