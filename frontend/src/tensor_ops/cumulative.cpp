// cumsum and cumprod, and their vjps.
#include "kiln/tensor_ops/cumulative.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/cumulative.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/rearrange.h"

namespace kiln {

namespace {

Tensor cumulative(const OpDef& op, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  KILN_CHECK(x.defined(), "[", op.name, "] got an undefined tensor.");
  ops::DimAttrs a;
  a.dim = dim;
  const Tensor in = dtype && *dtype != x.dtype() ? cast(x, *dtype) : x;
  return detail::call1(op, {in}, a);
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return cumulative(ops::cumsum, x, dim, dtype);
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return cumulative(ops::cumprod, x, dim, dtype);
}

namespace {

int64_t vjp_dim(const VjpCall& c) {
  return wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim,
                  static_cast<int64_t>(c.input_types[0].shape.size()), c.op.name.c_str());
}

// g summed from each position to the end of its line.
Tensor reverse_cumsum(const Tensor& g, int64_t d) {
  return flip(cumsum(flip(g, {d}), d), {d});
}

Tensors vjp_cumsum(const VjpCall& c) {
  const Tensor& g = c.grad_outputs[0];
  if (g.dim() == 0) return Tensors{g};
  return Tensors{reverse_cumsum(g, vjp_dim(c))};
}

// d out[j] / d x[i] = prod over k <= j, k != i of x[k], for j >= i. Before a line's first zero
// x[i] divides out[j] exactly, so grad[i] = (sum over j >= i of g[j] out[j]) / x[i]. At the
// first zero z the product skips x[z]: the running product of x with x[z] replaced by one. After
// it every product holds x[z] = 0, so the gradient is zero. This is PyTorch's case split, written
// with masks so that it needs no host read and stays differentiable.
Tensors vjp_cumprod(const VjpCall& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &x = c.inputs[0], &out = c.outputs[0];
  if (g.dim() == 0) return Tensors{g};
  const int64_t d = vjp_dim(c);
  const Tensor zeros_so_far = cumsum(x == 0, d);  // int64
  const Tensor before_zero = zeros_so_far == 0;
  const Tensor first_zero = logical_and(x == 0, zeros_so_far == 1);
  const Tensor nonzero_x = where(before_zero, x, 1);
  const Tensor before = reverse_cumsum(g * out, d) / nonzero_x;
  const Tensor at_zero = reverse_cumsum(g * cumprod(where(first_zero, 1, x), d), d);
  return Tensors{where(before_zero, before, where(first_zero, at_zero, 0))};
}

}  // namespace

namespace detail {

void register_cumulative_vjps() {
  set_vjp(ops::cumsum, vjp_cumsum, kSavesNothing);
  set_vjp(ops::cumprod, vjp_cumprod, {.inputs = 1, .outputs = 1});
}

}  // namespace detail
}  // namespace kiln
