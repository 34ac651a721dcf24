// Definitions of sort, topk and searchsorted.
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

void infer_searchsorted(InferCall& c) {
  infer::check_arity(c, 2);
  const Tensor &sorted = c.inputs[0], &values = c.inputs[1];
  KILN_CHECK(sorted.dim() >= 1, "[searchsorted] expected a sorted sequence with at least one dim, got ",
             sorted.type_str(), ". Fix: pass the boundaries as a 1-D tensor.");
  KILN_CHECK(sorted.dtype() == values.dtype() && sorted.dtype() != DType::Bool,
             "[searchsorted] expected the sorted sequence and the values to have one numeric dtype, got ",
             sorted.type_str(), " and ", values.type_str(), ". Fix: convert one to the other's dtype.");
  infer::check_compute_dtype(c, 0);
  KILN_CHECK(sorted.device() == values.device(), "[searchsorted] the sorted sequence is on ", sorted.device(),
             " and the values on ", values.device(), ". Fix: move both to one device.");
  if (sorted.dim() > 1) {
    bool leading_match = values.dim() == sorted.dim();
    for (int64_t d = 0; leading_match && d + 1 < sorted.dim(); ++d) leading_match = sorted.size(d) == values.size(d);
    KILN_CHECK(leading_match, "[searchsorted] a sorted sequence of shape ", shape_str(sorted.sizes()),
               " searches values with the same leading dims ([..., N]), got values of shape ",
               shape_str(values.sizes()), ". Fix: pass values shaped like the sequence but for the last dim, or a "
               "1-D sequence, which serves values of any shape.");
  }
  c.outputs.push_back({DType::Int64, Shape(values.sizes()), values.device()});
}

}  // namespace

// Only the values carry a gradient (indices are integers); the vjp reads the indices.
OpDef sort("sort", {"x"}, infer_sort, LoweringClass::Opaque, attrs_of<SortAttrs>());
OpDef topk("topk", {"x"}, infer_topk, LoweringClass::Opaque, attrs_of<TopkAttrs>());
OpDef searchsorted("searchsorted", {"sorted_sequence", "values"}, infer_searchsorted, LoweringClass::Opaque,
                   attrs_of<SearchSortedAttrs>(), {.differentiable = false});

}  // namespace kiln::ops
