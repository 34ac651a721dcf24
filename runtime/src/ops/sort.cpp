// Definitions of sort and topk.
#include "kiln/ops/sort.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

// Pushes the values' and indices' types: x's shape with dim `d` of length `length`.
void push_outputs(InferCall& c, int64_t d, int64_t length) {
  const Tensor& x = c.inputs[0];
  Shape shape(x.sizes());
  if (x.dim() > 0) shape[d] = length;
  c.outputs.push_back({x.dtype(), shape, x.device()});
  c.outputs.push_back({DType::Int64, shape, x.device()});
}

void infer_sort(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  const int64_t d = wrap_dim(static_cast<const SortAttrs&>(c.attrs).dim, x.dim(), "sort");
  push_outputs(c, d, x.dim() > 0 ? x.size(d) : 1);
}

void infer_topk(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const TopkAttrs&>(c.attrs);
  const int64_t d = wrap_dim(a.dim, x.dim(), "topk");
  const int64_t length = x.dim() > 0 ? x.size(d) : 1;
  KILN_CHECK(a.k >= 0 && a.k <= length, "[topk] expected 0 <= k <= ", length, " (the size of dim ", d,
             " of ", x.type_str(), "), got k = ", a.k, ". Fix: pass a smaller k, or sort the whole line.");
  push_outputs(c, d, a.k);
}

}  // namespace

// Only the values carry a gradient (indices are integers); the vjp reads the indices.
OpDef sort("sort", {"x"}, infer_sort, LoweringClass::Opaque, attrs_of<SortAttrs>());
OpDef topk("topk", {"x"}, infer_topk, LoweringClass::Opaque, attrs_of<TopkAttrs>());

}  // namespace kiln::ops
