// Definitions of cumsum and cumprod.
#include "kiln/ops/cumulative.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

DType cumulative_dtype(DType dtype) {
  return is_floating(dtype) ? dtype : DType::Int64;
}

namespace {

void infer_cumulative(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  wrap_dim(static_cast<const DimAttrs&>(c.attrs).dim, x.dim(), c.op.name.c_str());
  c.outputs.push_back({cumulative_dtype(x.dtype()), Shape(x.sizes()), x.device()});
}

}  // namespace

OpDef cumsum("cumsum", {"x"}, infer_cumulative, LoweringClass::Opaque, attrs_of<DimAttrs>());
OpDef cumprod("cumprod", {"x"}, infer_cumulative, LoweringClass::Opaque, attrs_of<DimAttrs>());

}  // namespace kiln::ops
