// sort, argsort, msort, topk and kthvalue, and the vjps of sort and topk.
#include "kiln/tensor_ops/sort.h"

#include <cmath>

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/sort.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {

ValuesAndIndices pair_of(const Tensors& outputs) {
  return {outputs[0], outputs[1]};
}

}  // namespace

ValuesAndIndices sort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always*/) {
  KILN_CHECK(x.defined(), "[sort] got an undefined tensor.");
  ops::SortAttrs a;
  a.dim = dim;
  a.descending = descending;
  return pair_of(detail::call(ops::sort, TensorSpan(&x, 1), a));
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return sort(x, dim, descending, stable).indices;
}

Tensor msort(const Tensor& x) {
  return sort(x, 0).values;
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    std::string_view side, const Tensor& sorter) {
  KILN_CHECK(sorted_sequence.defined() && values.defined(),
             "[searchsorted] got an undefined ", sorted_sequence.defined() ? "values" : "sorted sequence",
             " tensor.");
  KILN_CHECK(side.empty() || side == "left" || side == "right", "[searchsorted] expected side \"left\" or "
             "\"right\", got \"", side, "\".");
  KILN_CHECK(!(side == "left" && right), "[searchsorted] side = \"left\" contradicts right = true. Fix: pass "
             "one of them.");
  Tensor sorted = sorted_sequence;
  if (sorter.defined()) {
    KILN_CHECK(sorter.dtype() == kInt64 && Shape(sorter.sizes()) == Shape(sorted.sizes()),
               "[searchsorted] expected the sorter to be int64 and shaped like the sorted sequence ",
               sorted.type_str(), ", got ", sorter.type_str(), ". Fix: pass argsort(sequence).");
    sorted = gather(sorted, -1, sorter);
  }
  DType dtype = promote_types(sorted.dtype(), values.dtype());
  ops::SearchSortedAttrs a;
  a.right = right || side == "right";
  Tensor out = detail::call1(ops::searchsorted, {cast(sorted, dtype), cast(values, dtype)}, a);
  return out_int32 ? cast(out, kInt32) : out;
}

Tensor searchsorted(const Tensor& sorted_sequence, Scalar value, bool out_int32, bool right,
                    std::string_view side, const Tensor& sorter) {
  KILN_CHECK(sorted_sequence.defined(), "[searchsorted] got an undefined sorted sequence.");
  return searchsorted(sorted_sequence, scalar_like(value, sorted_sequence), out_int32, right, side, sorter);
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32, bool right) {
  KILN_CHECK(boundaries.defined() && boundaries.dim() == 1, "[bucketize] expected 1-D boundaries, got ",
             boundaries.defined() ? boundaries.type_str() : std::string("an undefined tensor"),
             ". Fix: flatten them, or use searchsorted for one sorted line per row.");
  return searchsorted(boundaries, x, out_int32, right);
}

// Composed: each element's bin index, then one scatter_add of the in-range mask.
Tensor histc(const Tensor& x, int64_t bins, double min, double max) {
  KILN_CHECK(x.defined() && is_floating(x.dtype()), "[histc] expected a floating tensor, got ",
             x.defined() ? x.type_str() : std::string("an undefined tensor"),
             ". Fix: convert it first (x.to(kiln::kFloat32)).");
  KILN_CHECK(bins > 0, "[histc] expected bins > 0, got ", bins, ". Fix: pass a positive count.");
  KILN_CHECK(min <= max, "[histc] expected min <= max, got min=", min, ", max=", max,
             ". Fix: swap them, or pass min == max to use the data's range.");
  const Tensor values = x.detach().flatten();
  if (min == max && values.numel() > 0) {
    min = amin(values).item<double>();
    max = amax(values).item<double>();
  }
  if (min == max) min -= 1, max += 1;  // PyTorch's range for constant data
  KILN_CHECK(std::isfinite(min) && std::isfinite(max), "[histc] the range [", min, ", ", max,
             "] is not finite. Fix: pass finite min and max (the data holds inf or NaN).");
  Tensor in_range = logical_and(values >= min, values <= max);
  Tensor bin = floor((values - min) * static_cast<double>(bins) / (max - min));
  // max itself is in the last bin; elements out of range (NaN too) count 0 into bin 0.
  bin = where(in_range, clamp(bin, 0, bins - 1), 0.0).to(kInt64);
  return scatter_add(zeros({bins}, TensorOptions(x.dtype()).with_device(x.device())), 0, bin,
                     in_range.to(x.dtype()));
}

ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted: always*/) {
  KILN_CHECK(x.defined(), "[topk] got an undefined tensor.");
  ops::TopkAttrs a;
  a.k = k;
  a.dim = dim;
  a.largest = largest;
  return pair_of(detail::call(ops::topk, TensorSpan(&x, 1), a));
}

ValuesAndIndices kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  KILN_CHECK(x.defined(), "[kthvalue] got an undefined tensor.");
  const int64_t d = wrap_dim(dim, x.dim(), "kthvalue");
  const int64_t length = x.dim() > 0 ? x.size(d) : 1;
  KILN_CHECK(k >= 1 && k <= length, "[kthvalue] expected 1 <= k <= ", length, " (the size of dim ", d, " of ",
             x.type_str(), "), got k = ", k, ". Fix: k counts from 1 and cannot pass the line's length.");
  ValuesAndIndices smallest = topk(x, k, d, /*largest=*/false);
  if (x.dim() == 0) return smallest;
  auto last = [&](const Tensor& t) { return keepdim ? slice(t, d, k - 1, k) : select(t, d, k - 1); };
  return {last(smallest.values), last(smallest.indices)};
}

namespace {

// sort's and topk's: the values' gradient goes back to the positions the indices name
// (distinct along each line, so the scatter adds each to a zero).
Tensors vjp_ordered(const VjpCall& c, int64_t dim) {
  const Tensor& g = c.grad_outputs[0];
  if (!g.defined()) return Tensors{Tensor()};
  IntList shape = c.input_types[0].shape;
  if (shape.empty()) return Tensors{g};
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), c.op.name.c_str());
  return Tensors{scatter_add(zeros(shape, TensorOptions(g.dtype()).with_device(g.device())), d, c.outputs[1], g)};
}

Tensors vjp_sort(const VjpCall& c) {
  return vjp_ordered(c, static_cast<const ops::SortAttrs&>(c.attrs).dim);
}

Tensors vjp_topk(const VjpCall& c) {
  return vjp_ordered(c, static_cast<const ops::TopkAttrs&>(c.attrs).dim);
}

}  // namespace

namespace detail {

void register_sort_vjps() {
  // They read the indices (output 1) and the input's shape alone.
  set_vjp(ops::sort, vjp_sort, {.inputs = 0, .outputs = 0b10});
  set_vjp(ops::topk, vjp_topk, {.inputs = 0, .outputs = 0b10});
}

}  // namespace detail
}  // namespace kiln
