// Reduction functions (primitives and the composites built from them) and their vjps.
#include "kiln/tensor_ops/reduction.h"

#include <cmath>
#include <limits>

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/autograd.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {

ops::ReduceAttrs reduce_attrs(IntList dims, bool keepdim) {
  ops::ReduceAttrs a;
  a.dims = Shape(dims);
  a.keepdim = keepdim;
  return a;
}

Tensor reduce(const OpDef& op, const Tensor& x, IntList dims, bool keepdim) {
  KILN_CHECK(x.defined(), "[", op.name, "] got an undefined tensor.");
  return detail::call1(op, {x}, reduce_attrs(dims, keepdim));
}

Tensor to_floating(const Tensor& x) {
  return is_floating(x.dtype()) ? x : cast(x, default_dtype());
}

// Number of elements each output of a reduction over `dims` combines.
int64_t reduced_count(IntList shape, IntList dims, const char* op) {
  uint64_t mask = reduction_mask(dims, static_cast<int64_t>(shape.size()), op);
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask & (1ull << d)) count *= shape[d];
  return count;
}

void check_not_empty(const Tensor& x, const char* op) {
  KILN_CHECK(x.defined(), "[", op, "] got an undefined tensor.");
  KILN_CHECK(x.numel() > 0, "[", op, "] expected a non-empty tensor, got shape ",
             shape_str(x.sizes()), ": ", op,
             " of no elements is undefined. Fix: pass a dim to reduce along a non-empty dim, or "
             "check numel() > 0 first.");
}

// `name` is the function the user called (max, argmin, ...), for the error messages.
std::tuple<Tensor, Tensor> dim_extreme(const OpDef& op, const char* name, const Tensor& x,
                                       int64_t dim, bool keepdim) {
  KILN_CHECK(x.defined(), "[", name, "] got an undefined tensor.");
  if (x.dim() > 0)
    ops::check_nonempty_reduction(x.sizes(), 1ull << wrap_dim(dim, x.dim(), name), name);
  ops::DimReduceAttrs a;
  a.dim = dim;
  a.keepdim = keepdim;
  Tensor in = x;
  Tensors out = detail::call(op, TensorSpan(&in, 1), a);
  return {out[0], out[1]};
}

Tensor arg_extreme(const OpDef& op, const char* name, const Tensor& x, std::optional<int64_t> dim,
                   bool keepdim) {
  KILN_CHECK(x.defined(), "[", name, "] got an undefined tensor.");
  // Indices carry no gradient: skip recording a node for the values nobody reads.
  NoGradGuard no_grad;
  Tensor values_unused, idx;
  if (dim) {
    std::tie(values_unused, idx) = dim_extreme(op, name, x, *dim, keepdim);
    return idx;
  }
  check_not_empty(x, name);
  std::tie(values_unused, idx) = dim_extreme(op, name, reshape(x, {-1}), 0, false);
  return keepdim ? reshape(idx, Shape(static_cast<size_t>(x.dim()), 1)) : idx;
}

}  // namespace

Tensor sum(const Tensor& x, IntList dims, bool keepdim) {
  return reduce(ops::sum, x, dims, keepdim);
}
Tensor prod(const Tensor& x, IntList dims, bool keepdim) {
  return reduce(ops::prod, x, dims, keepdim);
}

Tensor mean(const Tensor& x, IntList dims, bool keepdim) {
  KILN_CHECK(x.defined(), "[mean] got an undefined tensor.");
  int64_t count = reduced_count(x.sizes(), dims, "mean");
  // An empty reduction is 0/0 = nan, as in PyTorch.
  return sum(to_floating(x), dims, keepdim) / static_cast<double>(count);
}

Tensor amax(const Tensor& x, IntList dims, bool keepdim) {
  return reduce(ops::amax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, IntList dims, bool keepdim) {
  return reduce(ops::amin, x, dims, keepdim);
}

Tensor max(const Tensor& x) {
  check_not_empty(x, "max");
  return amax(x);
}
Tensor min(const Tensor& x) {
  check_not_empty(x, "min");
  return amin(x);
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return dim_extreme(ops::max_dim, "max", x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return dim_extreme(ops::min_dim, "min", x, dim, keepdim);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(ops::max_dim, "argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(ops::min_dim, "argmin", x, dim, keepdim);
}

Tensor all(const Tensor& x, IntList dims, bool keepdim) {
  return reduce(ops::all, x, dims, keepdim);
}
Tensor any(const Tensor& x, IntList dims, bool keepdim) {
  return reduce(ops::any, x, dims, keepdim);
}

Tensor var(const Tensor& x, IntList dims, double correction, bool keepdim) {
  KILN_CHECK(x.defined(), "[var] got an undefined tensor.");
  ops::VarAttrs a;
  a.dims = Shape(dims);
  a.keepdim = keepdim;
  a.correction = correction;
  return detail::call1(ops::var, {x}, a);
}

Tensor std(const Tensor& x, IntList dims, double correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntList dims, double correction,
                                    bool keepdim) {
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

Tensor logsumexp(const Tensor& x, IntList dims, bool keepdim) {
  KILN_CHECK(x.defined(), "[logsumexp] got an undefined tensor.");
  Tensor in = to_floating(x);
  // An empty group sums to 0 and gives log(0) = -inf; amax would refuse it.
  if (in.numel() == 0 || reduced_count(in.sizes(), dims, "logsumexp") == 0)
    return log(sum(exp(in), dims, keepdim));
  // Shift by the max so exp cannot overflow. The shift cancels in the value and in the
  // gradient, so it is taken from detached data; infinite maxima shift by 0 (inf - inf
  // would be nan).
  Tensor m = amax(in.detach(), dims, true);
  m = where(abs(m) == std::numeric_limits<double>::infinity(), zeros_like(m), m);
  Tensor s = log(sum(exp(in - m), dims, keepdim));
  return s + (keepdim ? m : reshape(m, ops::reduced_shape(in.sizes(), dims, false, "logsumexp")));
}

Tensor norm(const Tensor& x, double p, IntList dims, bool keepdim) {
  KILN_CHECK(x.defined(), "[norm] got an undefined tensor.");
  ops::NormAttrs a;
  a.p = p;
  a.dims = Shape(dims);
  a.keepdim = keepdim;
  return detail::call1(ops::norm, {x}, a);
}

Tensor norm(const Tensor& x, std::string_view p, IntList dims, bool keepdim) {
  KILN_CHECK(p == "fro", "[norm] expected p = \"fro\" or a number, got \"", p,
             "\". Fix: use \"fro\" (the 2-norm of all elements), or a numeric p such as 1, 2 or "
             "INFINITY.");
  return norm(x, 2.0, dims, keepdim);
}

// ---- vjps ----

namespace detail {

// The gradient of a reduction, broadcast back to the input: re-insert reduced dims
// (when keepdim was false) and expand.
Tensor expand_reduced_grad(const Tensor& g, IntList input_shape, IntList dims, bool keepdim) {
  Tensor r = g;
  if (!keepdim) r = reshape(g, ops::reduced_shape(input_shape, dims, true, "reduction"));
  return expand(r, input_shape);
}

Tensor expand_reduced_grad(const Tensor& g, IntList input_shape, const ops::ReduceAttrs& a) {
  return expand_reduced_grad(g, input_shape, a.dims, a.keepdim);
}

}  // namespace detail

namespace {

using detail::expand_reduced_grad;

const ops::ReduceAttrs& attrs_of(const VjpCall& c) {
  return static_cast<const ops::ReduceAttrs&>(c.attrs);
}
IntList in_shape(const VjpCall& c) {
  return c.input_types[0].shape;
}
Tensor as_dtype(const Tensor& mask, const Tensor& like) {
  return cast(mask, like.dtype());
}

Tensors vjp_sum(const VjpCall& c) {
  return Tensors{expand_reduced_grad(c.grad_outputs[0], in_shape(c), attrs_of(c))};
}

// d prod / d x_i = product of the others. Dividing the product by x_i fails at zeros, so:
// with no zero in the group it is prod / x_i; with exactly one zero only that element
// gets the product of the non-zeros; with more, every gradient is 0.
Tensors vjp_prod(const VjpCall& c) {
  const auto& a = attrs_of(c);
  const Tensor &x = c.inputs[0], &y = c.outputs[0];
  IntList shape = in_shape(c);
  Tensor g = expand_reduced_grad(c.grad_outputs[0], shape, a);
  Tensor is_zero = x == 0;
  Tensor safe = where(is_zero, ones_like(x), x);
  Tensor zeros_in_group = expand_reduced_grad(sum(is_zero, a.dims, a.keepdim), shape, a);
  Tensor others = expand_reduced_grad(prod(safe, a.dims, a.keepdim), shape, a);
  Tensor no_zero = expand_reduced_grad(y, shape, a) / safe;
  Tensor one_zero = where(is_zero & (zeros_in_group == 1), others, zeros_like(others));
  return Tensors{g * where(zeros_in_group == 0, no_zero, one_zero)};
}

// Ties share the gradient evenly, as in PyTorch's amax/amin.
Tensors vjp_extreme(const VjpCall& c) {
  const auto& a = attrs_of(c);
  IntList shape = in_shape(c);
  const Tensor& x = c.inputs[0];
  Tensor hit = as_dtype(x == expand_reduced_grad(c.outputs[0], shape, a), x);
  Tensor count = expand_reduced_grad(sum(hit, a.dims, a.keepdim), shape, a);
  return Tensors{expand_reduced_grad(c.grad_outputs[0], shape, a) * hit / count};
}

Tensors vjp_dim_extreme(const VjpCall& c) {
  const auto& a = static_cast<const ops::DimReduceAttrs&>(c.attrs);
  IntList shape = in_shape(c);
  Tensor g = c.grad_outputs[0];
  if (!g.defined()) return Tensors{Tensor()};
  if (shape.empty()) return Tensors{reshape(g, shape)};
  int64_t d = wrap_dim(a.dim, static_cast<int64_t>(shape.size()), c.op.name.c_str());
  Tensor idx = c.outputs[1];
  if (!a.keepdim) {
    g = unsqueeze(g, d);
    idx = unsqueeze(idx, d);
  }
  Tensor base = zeros(shape, TensorOptions(g.dtype()).with_device(g.device()));
  return Tensors{scatter_add(base, d, idx, g)};
}

Tensors vjp_var(const VjpCall& c) {
  const auto& a = static_cast<const ops::VarAttrs&>(c.attrs);
  IntList shape = in_shape(c);
  const Tensor& x = c.inputs[0];
  double n = static_cast<double>(reduced_count(shape, a.dims, "var"));
  Tensor g = expand_reduced_grad(c.grad_outputs[0], shape, a.dims, a.keepdim);
  return Tensors{g * (x - mean(x, a.dims, true)) * (2.0 / std::max(0.0, n - a.correction))};
}

// PyTorch's conventions at the kinks: sign(0) = 0, and a zero norm has a zero gradient.
Tensors vjp_norm(const VjpCall& c) {
  const auto& a = static_cast<const ops::NormAttrs&>(c.attrs);
  IntList shape = in_shape(c);
  const Tensor& x = c.inputs[0];
  Tensor g = expand_reduced_grad(c.grad_outputs[0], shape, a.dims, a.keepdim);
  Tensor y = expand_reduced_grad(c.outputs[0], shape, a.dims, a.keepdim);
  if (a.p == 0) return Tensors{zeros_like(x)};
  if (a.p == 1) return Tensors{g * sign(x)};
  Tensor safe_y = where(y == 0, ones_like(y), y);
  if (a.p == 2) return Tensors{g * x / safe_y};
  if (std::isinf(a.p)) {
    Tensor hit = as_dtype(abs(x) == y, x);
    Tensor count = expand_reduced_grad(sum(hit, a.dims, a.keepdim), shape, a.dims, a.keepdim);
    return Tensors{g * sign(x) * hit / count};
  }
  Tensor num = sign(x) * pow(abs(x), a.p - 1);
  return Tensors{g * num / pow(safe_y, a.p - 1)};
}

}  // namespace

namespace detail {

void register_reduction_vjps() {
  set_vjp(ops::sum, vjp_sum, kSavesNothing);
  // prod's vjp reads x and the product; amax/amin/norm's compare x with the result;
  // max_dim/min_dim's only scatter into the selected positions.
  set_vjp(ops::prod, vjp_prod, {.outputs = 1});
  set_vjp(ops::amax, vjp_extreme, {.outputs = 1});
  set_vjp(ops::amin, vjp_extreme, {.outputs = 1});
  set_vjp(ops::max_dim, vjp_dim_extreme, {.inputs = 0, .outputs = 0b10});
  set_vjp(ops::min_dim, vjp_dim_extreme, {.inputs = 0, .outputs = 0b10});
  set_vjp(ops::var, vjp_var);
  set_vjp(ops::norm, vjp_norm, {.outputs = 1});
}

}  // namespace detail
}  // namespace kiln
