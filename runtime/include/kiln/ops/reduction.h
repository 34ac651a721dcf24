// Reductions over a set of dims (all dims when `dims` is empty), with keepdim.
// Primitives only: mean, std, logsumexp, argmax/argmin and Tensor::max() are composites in
// the frontend.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct ReduceAttrs : AttrsOf<ReduceAttrs> {
  Shape dims;  // empty: every dim
  bool keepdim = false;
  template <class V>
  void fields(V& v) {
    v("dims", dims), v("keepdim", keepdim);
  }
};
// sum, prod: bool and integer inputs reduce to int64, floating to their own dtype.
extern OpDef sum, prod;
// amax, amin: the largest/smallest value (nan if any element is nan), same dtype. Reducing
// a dim of size 0 is an error (no identity). The gradient is shared evenly between ties.
extern OpDef amax, amin;
// all, any: bool results (true/false for an empty reduction); not differentiable.
extern OpDef all, any;

// A reduction along one dim that also returns where the value came from.
struct DimReduceAttrs : AttrsOf<DimReduceAttrs> {
  int64_t dim = 0;
  bool keepdim = false;
  template <class V>
  void fields(V& v) {
    v("dim", dim), v("keepdim", keepdim);
  }
};
// max_dim, min_dim(x) -> (values, indices: int64). The first extreme element wins (the
// first nan, if any), as in PyTorch. The gradient flows to the selected element.
extern OpDef max_dim, min_dim;

struct VarAttrs : AttrsOf<VarAttrs> {
  Shape dims;  // empty: every dim
  bool keepdim = false;
  double correction = 1;  // divide by max(0, N - correction) (1: Bessel's correction)
  template <class V>
  void fields(V& v) {
    v("dims", dims), v("keepdim", keepdim), v("correction", correction);
  }
};
// var: floating inputs only; one pass (Welford) with a float64 accumulator.
extern OpDef var;

struct NormAttrs : AttrsOf<NormAttrs> {
  double p = 2;  // any p >= 0, or +-inf
  Shape dims;    // empty: every dim
  bool keepdim = false;
  template <class V>
  void fields(V& v) {
    v("p", p), v("dims", dims), v("keepdim", keepdim);
  }
};
// norm: the vector p-norm (sum |x|^p)^(1/p) over dims, as torch.linalg.vector_norm.
// Floating inputs only. p = +-inf over an empty reduction is an error (no identity).
extern OpDef norm;

// The output shape of reducing `input` over `dims` (shared by reduction infers).
Shape reduced_shape(IntList input, IntList dims, bool keepdim, const char* op);
Shape reduced_shape(IntList input, const ReduceAttrs& attrs, const char* op);

// Throws unless every dim a reduction covers is non-empty (for reductions with no
// identity: max, min, argmax, the inf-norm).
void check_nonempty_reduction(IntList input, uint64_t mask, const char* op);

}  // namespace kiln::ops
