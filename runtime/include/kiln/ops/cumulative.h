// The cumulative ops: each element of a line along a dim becomes the sum (cumsum) or the
// product (cumprod) of the line up to and including it. They run through their eager
// kernels in compiled graphs (LoweringClass::Opaque): a scan carries a dependence along the
// line that the elementwise and reduction generators do not express.
#pragma once

#include "kiln/op.h"
#include "kiln/ops/view.h"  // DimAttrs

namespace kiln::ops {

// cumsum(x), cumprod(x) along DimAttrs::dim. Floating inputs keep their dtype; bool and
// integer inputs give int64, as in PyTorch (a running sum of int32 or bool overflows or
// saturates otherwise). A 0-d input is its own result (dim 0 or -1).
extern OpDef cumsum;
extern OpDef cumprod;

// The dtype cumsum and cumprod give for an input of `dtype`.
DType cumulative_dtype(DType dtype);

}  // namespace kiln::ops
