// Reduction functions and their vjps.
#include "kiln/tensor_ops/reduction.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {

ops::ReduceAttrs reduce_attrs(IntList dims, bool keepdim) {
  ops::ReduceAttrs a;
  a.dims = Shape(dims);
  a.keepdim = keepdim;
  return a;
}

}  // namespace

Tensor sum(const Tensor& x, IntList dims, bool keepdim) {
  return detail::call1(ops::sum, {x}, reduce_attrs(dims, keepdim));
}

Tensor mean(const Tensor& x, IntList dims, bool keepdim) {
  Tensor in = is_floating(x.dtype()) ? x : cast(x, default_dtype());
  uint64_t mask = reduction_mask(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask & (1ull << d)) count *= x.size(d);
  // An empty reduction is 0/0 = nan, as in PyTorch.
  return sum(in, dims, keepdim) / static_cast<double>(count);
}

namespace detail {

// The gradient of a reduction, broadcast back to the input: re-insert reduced dims
// (when keepdim was false) and expand.
Tensor expand_reduced_grad(const Tensor& g, IntList input_shape, const ops::ReduceAttrs& a) {
  Tensor r = g;
  if (!a.keepdim) {
    Shape kept = ops::reduced_shape(input_shape, [&] {
      ops::ReduceAttrs k = a;
      k.keepdim = true;
      return k;
    }(), "sum");
    r = reshape(g, kept);
  }
  return expand(r, input_shape);
}

}  // namespace detail

namespace {

Tensors vjp_sum(const VjpCall& c) {
  const auto& a = static_cast<const ops::ReduceAttrs&>(c.attrs);
  return Tensors{detail::expand_reduced_grad(c.grad_outputs[0], c.input_types[0].shape, a)};
}

}  // namespace

namespace detail {

void register_reduction_vjps() { set_vjp(ops::sum, vjp_sum); }

}  // namespace detail
}  // namespace kiln
