// Definitions of the reduction ops.
#include "kiln/ops/reduction.h"

#include <cmath>

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

Shape reduced_shape(IntList input, IntList dims, bool keepdim, const char* op) {
  int64_t rank = static_cast<int64_t>(input.size());
  uint64_t mask = reduction_mask(dims, rank, op);
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (mask & (1ull << i)) {
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(input[i]);
    }
  }
  return out;
}

Shape reduced_shape(IntList input, const ReduceAttrs& attrs, const char* op) {
  return reduced_shape(input, attrs.dims, attrs.keepdim, op);
}

void check_nonempty_reduction(IntList input, uint64_t mask, const char* op) {
  for (size_t d = 0; d < input.size(); ++d)
    KILN_CHECK(!(mask & (1ull << d)) || input[d] != 0, "[", op, "] cannot reduce dim ", d,
               " of shape ", shape_str(input), ": it has size 0 and ", op,
               " of no elements is undefined. Fix: reduce over non-empty dims only (pass `dim`), "
               "or check numel() > 0 first.");
}

namespace {

const ReduceAttrs& reduce_attrs(const InferCall& c) {
  return static_cast<const ReduceAttrs&>(c.attrs);
}

// sum and prod: integers accumulate in int64, as in PyTorch.
void infer_sum_like(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  DType out = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  c.outputs.push_back(
      {out, reduced_shape(x.sizes(), reduce_attrs(c), c.op.name.c_str()), x.device()});
}

void infer_extreme(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  const auto& a = reduce_attrs(c);
  check_nonempty_reduction(x.sizes(), reduction_mask(a.dims, x.dim(), c.op.name.c_str()),
                           c.op.name.c_str());
  c.outputs.push_back({x.dtype(), reduced_shape(x.sizes(), a, c.op.name.c_str()), x.device()});
}

void infer_logical(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  c.outputs.push_back(
      {DType::Bool, reduced_shape(x.sizes(), reduce_attrs(c), c.op.name.c_str()), x.device()});
}

void infer_dim_extreme(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const DimReduceAttrs&>(c.attrs);
  const char* op = c.op.name.c_str();
  int64_t d = wrap_dim(a.dim, x.dim(), op);
  Shape dims{d};
  if (x.dim() > 0) check_nonempty_reduction(x.sizes(), 1ull << d, op);
  Shape out = reduced_shape(x.sizes(), dims, a.keepdim, op);
  c.outputs.push_back({x.dtype(), out, x.device()});
  c.outputs.push_back({DType::Int64, out, x.device()});
}

void infer_var(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64,
             "[var] expected a float32 or float64 input, got ", x.dtype(),
             " (var and std are only defined for floating types, as in PyTorch). Fix: convert with "
             ".to(kiln::kFloat32) first.");
  const auto& a = static_cast<const VarAttrs&>(c.attrs);
  KILN_CHECK(std::isfinite(a.correction), "[var] correction must be finite, got ", a.correction,
             ".");
  c.outputs.push_back({x.dtype(), reduced_shape(x.sizes(), a.dims, a.keepdim, "var"), x.device()});
}

void infer_norm(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64,
             "[norm] expected a float32 or float64 input, got ", x.dtype(),
             ". Fix: convert with .to(kiln::kFloat32) first.");
  const auto& a = static_cast<const NormAttrs&>(c.attrs);
  KILN_CHECK(a.p >= 0 || std::isinf(a.p), "[norm] expected p >= 0 or p = +-inf, got p = ", a.p,
             ". Fix: pass a non-negative order.");
  uint64_t mask = reduction_mask(a.dims, x.dim(), "norm");
  for (int64_t d = 0; d < x.dim() && std::isinf(a.p); ++d)
    KILN_CHECK(!(mask & (1ull << d)) || x.size(d) != 0, "[norm] cannot compute the p = ", a.p,
               " norm over dim ", d, " of shape ", shape_str(x.sizes()),
               ": it has size 0 and max/min of no elements is undefined. Fix: reduce over "
               "non-empty dims only, or use a finite p.");
  c.outputs.push_back({x.dtype(), reduced_shape(x.sizes(), a.dims, a.keepdim, "norm"), x.device()});
}

}  // namespace

constexpr auto R = LoweringClass::Reduction;

OpDef sum("sum", {"x"}, infer_sum_like, R, attrs_of<ReduceAttrs>());
OpDef prod("prod", {"x"}, infer_sum_like, R, attrs_of<ReduceAttrs>());
OpDef amax("amax", {"x"}, infer_extreme, R, attrs_of<ReduceAttrs>());
OpDef amin("amin", {"x"}, infer_extreme, R, attrs_of<ReduceAttrs>());
OpDef all("all", {"x"}, infer_logical, R, attrs_of<ReduceAttrs>(), {.differentiable = false});
OpDef any("any", {"x"}, infer_logical, R, attrs_of<ReduceAttrs>(), {.differentiable = false});
OpDef max_dim("max_dim", {"x"}, infer_dim_extreme, R, attrs_of<DimReduceAttrs>());
OpDef min_dim("min_dim", {"x"}, infer_dim_extreme, R, attrs_of<DimReduceAttrs>());
OpDef var("var", {"x"}, infer_var, R, attrs_of<VarAttrs>());
OpDef norm("norm", {"x"}, infer_norm, R, attrs_of<NormAttrs>());

}  // namespace kiln::ops
