// masked_select, nonzero, argwhere and unique, and masked_select's vjp.
#include "kiln/tensor_ops/selection.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/selection.h"
#include "kiln/tensor_ops/cumulative.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/sort.h"

namespace kiln {

namespace {

// The number of true entries of `flags`: a read of the data, so a graph break under compile;
// the error says which op needed it and how to keep the op in the graph.
int64_t count_true(const Tensor& flags, const char* op, SourceLoc loc) {
  try {
    return cast(flags, kInt64).sum().item<int64_t>(loc);
  } catch (const GraphBreakError& e) {
    throw GraphBreakError(detail::str_cat(
        "[", op, "] the length of its result depends on the data (how many elements it selects), so it reads "
        "the data here. Fix: pass size = an upper bound (the result is padded with fill_value) to keep ", op,
        " inside the compiled graph, or compile without fullgraph to split the forward at this point. ", e.what()));
  }
}

ops::SelectionAttrs selection(int64_t size, double fill) {
  KILN_CHECK(size >= 0, "[selection] expected size >= 0, got ", size, ".");
  ops::SelectionAttrs a;
  a.size = size;
  a.fill = fill;
  return a;
}

}  // namespace

Tensor masked_select(const Tensor& x, const Tensor& mask, std::optional<int64_t> size, double fill_value,
                     SourceLoc loc) {
  KILN_CHECK(x.defined() && mask.defined(), "[masked_select] got an undefined tensor.");
  KILN_CHECK(mask.dtype() == kBool, "[masked_select] expected a bool mask, got ", mask.type_str(),
             ". Fix: compare to make one (x > 0), or convert with .to(kiln::kBool).");
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_select");
  const Tensor xs = x.expand(shape), ms = mask.expand(shape);
  const int64_t n = size ? *size : count_true(ms, "masked_select", loc);
  return detail::call1(ops::masked_select, {xs, ms}, selection(n, fill_value));
}

Tensor nonzero(const Tensor& x, std::optional<int64_t> size, int64_t fill_value, SourceLoc loc) {
  KILN_CHECK(x.defined(), "[nonzero] got an undefined tensor.");
  const int64_t n = size ? *size : count_true(x.dtype() == kBool ? x : ne(x, zeros({}, x.dtype())), "nonzero", loc);
  return detail::call1(ops::nonzero, {x}, selection(n, static_cast<double>(fill_value)));
}

Tensor argwhere(const Tensor& x, std::optional<int64_t> size, int64_t fill_value, SourceLoc loc) {
  return nonzero(x, size, fill_value, loc);
}

UniqueResult unique(const Tensor& x, SourceLoc loc) {
  KILN_CHECK(x.defined(), "[unique] got an undefined tensor.");
  const TensorOptions index_options = TensorOptions(kInt64).with_device(x.device());
  const Tensor flat = x.reshape({-1});
  const int64_t n = flat.numel();
  if (n == 0) return {flat, zeros(x.sizes(), index_options), zeros({0}, index_options)};
  auto [sorted, order] = sort(flat);
  // first[i]: sorted[i] starts a run of equal values (NaN != NaN: each NaN is its own run).
  const Tensor first = cat({ones({1}, TensorOptions(kBool).with_device(x.device())),
                            ne(sorted.slice(0, 1, n), sorted.slice(0, 0, n - 1))}, 0);
  const Tensor group = cumsum(first, 0) - 1;  // each sorted element's run
  const int64_t distinct = count_true(first, "unique", loc);
  const Tensor values = masked_select(sorted, first, distinct);
  const Tensor inverse = scatter_add(zeros({n}, index_options), 0, order, group).reshape(x.sizes());
  const Tensor counts = scatter_add(zeros({distinct}, index_options), 0, group, ones({n}, index_options));
  return {values, inverse, counts};
}

namespace {

// Each selected element's gradient is the output gradient at its place: place = the count of
// selected elements before it (cumsum of the mask), kept while below the output's length.
Tensors vjp_masked_select(const VjpCall& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor& mask = c.inputs[1];
  const IntList shape = c.input_types[0].shape;
  const int64_t size = g.numel();
  if (size == 0) return Tensors{zeros(shape, TensorOptions(g.dtype()).with_device(g.device())), Tensor()};
  const Tensor flat_mask = mask.reshape({-1});
  const Tensor place = cumsum(flat_mask, 0) - 1;
  const Tensor taken = logical_and(flat_mask, place < size);
  const Tensor picked = index_select(g, 0, clamp(place, 0, size - 1));
  return Tensors{where(taken, picked, 0).reshape(shape), Tensor()};
}

}  // namespace

namespace detail {

void register_selection_vjps() {
  set_vjp(ops::masked_select, vjp_masked_select, {.inputs = 0b10});
}

}  // namespace detail
}  // namespace kiln
