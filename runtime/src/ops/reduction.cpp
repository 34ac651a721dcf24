// Definitions of the reduction ops.
#include "kiln/ops/reduction.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

Shape reduced_shape(IntList input, const ReduceAttrs& attrs, const char* op) {
  int64_t rank = static_cast<int64_t>(input.size());
  uint64_t mask = reduction_mask(attrs.dims, rank, op);
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (mask & (1ull << i)) {
      if (attrs.keepdim) out.push_back(1);
    } else {
      out.push_back(input[i]);
    }
  }
  return out;
}

namespace {

void infer_sum(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  DType out = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  c.outputs.push_back({out, reduced_shape(x.sizes(), static_cast<const ReduceAttrs&>(c.attrs), "sum"), x.device()});
}

}  // namespace

OpDef sum("sum", {"x"}, infer_sum, LoweringClass::Reduction);

namespace {
struct Properties {
  Properties() { sum.saves_inputs = 0; }
} properties;
}  // namespace

}  // namespace kiln::ops
