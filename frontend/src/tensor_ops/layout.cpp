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
  set_vjp(ops::index_select, vjp_index_select, {.inputs = 0b10});
  set_vjp(ops::index_add, vjp_index_add, {.inputs = 0b10});
}

}  // namespace detail
}  // namespace kiln
