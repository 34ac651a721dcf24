// Layout functions (cat, the index ops, and the composites stack, split, chunk,
// masked_fill, tril, triu) and the vjps of the layout ops.
#include "kiln/tensor_ops/layout.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/layout.h"
#include "kiln/ops/view.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {

ops::DimAttrs dim_attrs(int64_t dim) {
  ops::DimAttrs a;
  a.dim = dim;
  return a;
}

// Indices may come as int32 (PyTorch accepts them in index_select); kernels read int64.
Tensor as_index(const Tensor& index, const char* op) {
  KILN_CHECK(index.defined(), "[", op, "] got an undefined index.");
  return index.dtype() == DType::Int32 ? cast(index, kInt64) : index;
}

Tensor like_dtype(const Tensor& src, const Tensor& x, const char* op) {
  KILN_CHECK(x.defined() && src.defined(), "[", op, "] got an undefined tensor.");
  return src.dtype() == x.dtype() ? src : cast(src, x.dtype());
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(),
             "[cat] expected a non-empty list of tensors. Fix: pass at least one tensor.");
  DType d = tensors[0].defined() ? tensors[0].dtype() : default_dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "[cat] tensor ", i, " is undefined.");
    d = promote_types(d, tensors[i].dtype());
  }
  Tensors in;
  for (const Tensor& t : tensors) in.push_back(t.dtype() == d ? t : cast(t, d));
  return detail::call(ops::cat, TensorSpan(in.data(), in.size()), dim_attrs(dim))[0];
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(),
             "[stack] expected a non-empty list of tensors. Fix: pass at least one tensor.");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "[stack] tensor ", i, " is undefined.");
    KILN_CHECK(tensors[i].sizes() == tensors[0].sizes(),
               "[stack] expected tensors of one shape, got ", shape_str(tensors[0].sizes()),
               " (tensor 0) and ", shape_str(tensors[i].sizes()), " (tensor ", i,
               "). Fix: reshape or pad them to one shape, or use kiln::cat.");
  }
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, IntList split_sizes, int64_t dim) {
  KILN_CHECK(x.defined(), "[split] got an undefined tensor.");
  KILN_CHECK(x.dim() > 0, "[split] cannot split a 0-d tensor. Fix: reshape it to 1-D first.");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    KILN_CHECK(s >= 0, "[split] split sizes must be non-negative, got ", shape_str(split_sizes),
               ".");
    total += s;
  }
  KILN_CHECK(total == x.size(d), "[split] split sizes ", shape_str(split_sizes), " add up to ",
             total, " but dim ", d, " of ", x.type_str(), " has size ", x.size(d),
             ". Fix: pass sizes that add up to ", x.size(d), ".");
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(slice(x, d, start, start + s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, IntList split_sizes, int64_t dim) {
  return split_with_sizes(x, split_sizes, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  KILN_CHECK(x.defined(), "[split] got an undefined tensor.");
  KILN_CHECK(x.dim() > 0, "[split] cannot split a 0-d tensor. Fix: reshape it to 1-D first.");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t n = x.size(d);
  KILN_CHECK(split_size > 0 || (split_size == 0 && n == 0),
             "[split] expected a positive split_size, got ", split_size, " for dim ", d,
             " of size ", n, ".");
  if (n == 0) return {x};
  Shape sizes;
  for (int64_t start = 0; start < n; start += split_size)
    sizes.push_back(std::min(split_size, n - start));
  return split_with_sizes(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(x.defined(), "[chunk] got an undefined tensor.");
  KILN_CHECK(chunks > 0, "[chunk] expected a positive number of chunks, got ", chunks, ".");
  KILN_CHECK(x.dim() > 0, "[chunk] cannot chunk a 0-d tensor. Fix: reshape it to 1-D first.");
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.size(d);
  if (n == 0)
    return std::vector<Tensor>(static_cast<size_t>(chunks), x);  // PyTorch: `chunks` empty pieces
  return split(x, (n + chunks - 1) / chunks, d);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  KILN_CHECK(x.defined(), "[gather] got an undefined tensor.");
  return detail::call1(ops::gather, {x, as_index(index, "gather")}, dim_attrs(dim));
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return detail::call1(ops::scatter_add,
                       {x, as_index(index, "scatter_add"), like_dtype(src, x, "scatter_add")},
                       dim_attrs(dim));
}

namespace {

Tensor call_scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                           std::string reduce, bool include_self) {
  ops::ScatterReduceAttrs a;
  a.dim = dim;
  a.reduce = std::move(reduce);
  a.include_self = include_self;
  const char* op = a.reduce == "replace" ? "scatter" : "scatter_reduce";
  return detail::call1(ops::scatter_reduce, {x, as_index(index, op), like_dtype(src, x, op)}, a);
}

}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_scatter_reduce(x, dim, index, src, "replace", true);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  KILN_CHECK(x.defined() && index.defined(), "[scatter] got an undefined tensor.");
  return scatter(x, dim, index, full(index.sizes(), value, TensorOptions(x.dtype()).with_device(x.device())));
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self) {
  KILN_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
             "[scatter_reduce] expected reduce \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\", got \"", reduce,
             "\". Fix: for PyTorch's plain scatter use kiln::scatter.");
  return call_scatter_reduce(x, dim, index, src, std::string(reduce), include_self);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  KILN_CHECK(x.defined(), "[index_select] got an undefined tensor.");
  return detail::call1(ops::index_select, {x, as_index(index, "index_select")}, dim_attrs(dim));
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return detail::call1(ops::index_add,
                       {x, as_index(index, "index_add"), like_dtype(src, x, "index_add")},
                       dim_attrs(dim));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  KILN_CHECK(x.defined() && mask.defined() && value.defined(),
             "[masked_fill] got an undefined tensor.");
  KILN_CHECK(mask.dtype() == DType::Bool, "[masked_fill] expected a bool mask, got ", mask.dtype(),
             ". Fix: compare first (x > 0) or convert with .to(kiln::kBool).");
  KILN_CHECK(value.dim() == 0, "[masked_fill] expected a 0-d value tensor, got ", value.type_str(),
             ". Fix: use kiln::where(mask, values, x) for a tensor of values.");
  Shape b = broadcast_shapes(mask.sizes(), x.sizes(), "masked_fill");
  KILN_CHECK(b == Shape(x.sizes()), "[masked_fill] the mask ", shape_str(mask.sizes()),
             " must broadcast to the input's shape ", shape_str(x.sizes()),
             ", but it would grow it to ", shape_str(b), ". Fix: reduce or slice the mask.");
  return where(mask, value.dtype() == x.dtype() ? value : cast(value, x.dtype()), x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  KILN_CHECK(x.defined(), "[masked_fill] got an undefined tensor.");
  return masked_fill(x, mask, Tensor::scalar(value, x.dtype()));  // a host scalar joins any device
}

namespace {

// where(keep, x, 0) with keep(i, j) = cmp(j - i, diagonal) over the last two dims.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  KILN_CHECK(x.defined(), "[", op, "] got an undefined tensor.");
  KILN_CHECK(x.dim() >= 2, "[", op, "] expected a tensor with at least 2 dims, got ", x.type_str(),
             ". Fix: reshape it to [rows, cols] first.");
  int64_t rows = x.size(-2), cols = x.size(-1);
  const TensorOptions on_x = TensorOptions(kInt64).with_device(x.device());
  Tensor offset = reshape(arange(0, cols, 1, on_x), {1, cols}) - reshape(arange(0, rows, 1, on_x), {rows, 1});
  Tensor keep = lower ? offset <= diagonal : offset >= diagonal;
  return where(keep, x, Tensor::scalar(0, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  return triangle(x, diagonal, true, "tril");
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  return triangle(x, diagonal, false, "triu");
}

// ---- vjps ----

namespace {

int64_t vjp_dim(const VjpCall& c, size_t rank) {
  return wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim, static_cast<int64_t>(rank),
                  c.op.name.c_str());
}
TensorOptions options_of(const Tensor& g) {
  return TensorOptions(g.dtype()).with_device(g.device());
}

// Pads t with zeros at the end of each dim up to `shape` (t.size(d) <= shape[d]).
Tensor pad_to(Tensor t, IntList shape) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == shape[d]) continue;
    Shape fill(t.sizes());
    fill[d] = shape[d] - t.size(d);
    t = cat({t, zeros(fill, options_of(t))}, d);
  }
  return t;
}

Tensors vjp_cat(const VjpCall& c) {
  const Tensor& g = c.grad_outputs[0];
  int64_t d = vjp_dim(c, static_cast<size_t>(g.dim()));
  Tensors out;
  int64_t start = 0;
  for (size_t i = 0; i < c.input_types.size(); ++i) {
    IntList shape = c.input_types[i].shape;
    bool skipped = shape.size() == 1 && shape[0] == 0 && g.dim() != 1;
    int64_t len = skipped ? 0 : shape[d];
    if (!c.needs(i))
      out.push_back(Tensor());
    else if (skipped)
      out.push_back(zeros(shape, options_of(g)));
    else
      out.push_back(slice(g, d, start, start + len));
    start += len;
  }
  return out;
}

Tensors vjp_gather(const VjpCall& c) {
  IntList shape = c.input_types[0].shape;
  const Tensor& g = c.grad_outputs[0];
  int64_t d = vjp_dim(c, shape.size());
  return Tensors{scatter_add(zeros(shape, options_of(g)), d, c.inputs[1], g), Tensor()};
}

Tensors vjp_scatter_add(const VjpCall& c) {
  const Tensor& g = c.grad_outputs[0];
  int64_t d = vjp_dim(c, static_cast<size_t>(g.dim()));
  Tensor gsrc;
  if (c.needs(2)) gsrc = pad_to(gather(g, d, c.inputs[1]), c.input_types[2].shape);
  return Tensors{c.needs(0) ? g : Tensor(), Tensor(), gsrc};
}

// The first index.size(d) of t along every dim d (src may be larger than the index).
Tensor narrow_to(Tensor t, IntList shape) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != shape[d]) t = t.narrow(d, 0, shape[d]);
  return t;
}

// scatter_reduce's vjp, in scatter_reduce's own terms: which positions the index reached, how
// many values reached each, and for amax/amin/prod which values the result depends on.
Tensors vjp_scatter_reduce(const VjpCall& c) {
  const auto& a = static_cast<const ops::ScatterReduceAttrs&>(c.attrs);
  const Tensor& g = c.grad_outputs[0];
  const Tensor &x = c.inputs[0], &index = c.inputs[1], &result = c.outputs[0];
  const int64_t d = wrap_dim(a.dim, g.dim(), "scatter_reduce");
  const TensorOptions opts = options_of(g);
  const Tensor src = narrow_to(c.inputs[2], index.sizes());
  const Tensor zero = zeros(g.sizes(), opts), ones_src = ones(index.sizes(), opts);
  // How many src values reached each position (0 where none did).
  const Tensor reached = scatter_add(zero, d, index, ones_src);
  const Tensor untouched = cast(reached == 0, g.dtype());
  Tensor gx, gsrc;
  if (a.reduce == "replace") {
    // The value that won each position: the last in index order along dim.
    Shape order_shape(static_cast<size_t>(index.dim()), 1);
    order_shape[static_cast<size_t>(d)] = index.size(d);
    const Tensor order = arange(0, index.size(d), 1, TensorOptions(kInt64).with_device(g.device()))
                             .reshape(order_shape)
                             .expand(index.sizes());
    const Tensor last = scatter_reduce(full(g.sizes(), -1, TensorOptions(kInt64).with_device(g.device())), d, index,
                                       order, "amax");
    gsrc = gather(g, d, index) * cast(gather(last, d, index) == order, g.dtype());
    gx = g * untouched;
  } else if (a.reduce == "sum" || a.reduce == "mean") {
    const Tensor divisor = a.reduce == "mean" ? clamp(reached + (a.include_self ? 1 : 0), 1, std::nullopt)
                                              : ones(g.sizes(), opts);
    const Tensor per_value = g / divisor;
    gsrc = gather(per_value, d, index);
    gx = a.include_self ? per_value : g * untouched;
  } else if (a.reduce == "amax" || a.reduce == "amin") {
    // Ties share the gradient evenly (PyTorch's rule).
    const Tensor src_hits = cast(src == gather(result, d, index), g.dtype());
    const Tensor self_hits = a.include_self ? cast(x == result, g.dtype()) : zero;
    const Tensor ties = clamp(scatter_add(self_hits, d, index, src_hits), 1, std::nullopt);
    const Tensor share = g / ties;
    gsrc = gather(share, d, index) * src_hits;
    gx = a.include_self ? share * self_hits : g * untouched;
  } else {  // prod
    // d/dv of a product is the product of the others: result / v, except at zeros, where it
    // is the product of the nonzero others when v is the group's only zero (else 0).
    const Tensor x_zero = x == 0, src_zero = src == 0;
    const Tensor x_nonzero_part = where(x_zero, 1, x), src_nonzero_part = where(src_zero, 1, src);
    const Tensor nonzero_product =
        scatter_reduce(a.include_self ? x_nonzero_part : ones(g.sizes(), opts), d, index, src_nonzero_part, "prod",
                       a.include_self);
    const Tensor zero_count =
        scatter_add(a.include_self ? cast(x_zero, g.dtype()) : zero, d, index, cast(src_zero, g.dtype()));
    const Tensor result_at_src = gather(result, d, index);
    const Tensor src_grad = where(src_zero, where(gather(zero_count, d, index) == 1, gather(nonzero_product, d, index), 0),
                                  result_at_src / src_nonzero_part);
    gsrc = gather(g, d, index) * src_grad;
    if (a.include_self) {
      const Tensor x_grad = where(x_zero, where(zero_count == 1, nonzero_product, 0), result / x_nonzero_part);
      gx = g * x_grad;
    } else {
      gx = g * untouched;
    }
  }
  if (c.needs(2)) gsrc = pad_to(gsrc, c.input_types[2].shape);
  return Tensors{c.needs(0) ? gx : Tensor(), Tensor(), c.needs(2) ? gsrc : Tensor()};
}

Tensors vjp_index_select(const VjpCall& c) {
  IntList shape = c.input_types[0].shape;
  const Tensor& g = c.grad_outputs[0];
  int64_t d = vjp_dim(c, shape.size());
  return Tensors{index_add(zeros(shape, options_of(g)), d, c.inputs[1], g), Tensor()};
}

Tensors vjp_index_add(const VjpCall& c) {
  const Tensor& g = c.grad_outputs[0];
  int64_t d = vjp_dim(c, static_cast<size_t>(g.dim()));
  return Tensors{c.needs(0) ? g : Tensor(), Tensor(),
                 c.needs(2) ? index_select(g, d, c.inputs[1]) : Tensor()};
}

}  // namespace

namespace detail {

void register_layout_vjps() {
  set_vjp(ops::cat, vjp_cat, kSavesNothing);
  // The index vjps read only the index.
  set_vjp(ops::gather, vjp_gather, {.inputs = 0b10});
  set_vjp(ops::scatter_add, vjp_scatter_add, {.inputs = 0b10});
  set_vjp(ops::scatter_reduce, vjp_scatter_reduce, {.inputs = 0b111, .outputs = 1});
  set_vjp(ops::index_select, vjp_index_select, {.inputs = 0b10});
  set_vjp(ops::index_add, vjp_index_add, {.inputs = 0b10});
}

}  // namespace detail
}  // namespace kiln
