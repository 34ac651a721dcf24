// View functions and their vjps.
#include "kiln/tensor_ops/view.h"

#include "../call.h"
#include "../trace/tracer.h"
#include "../vjp_registry.h"
#include "kiln/ops/view.h"
#include "kiln/symbolic_size.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"  // index_add, for vjp_as_strided

namespace kiln {

namespace {

// Resolves one -1 entry of a requested shape.
Shape infer_size(IntList sizes, int64_t total, const char* op) {
  Shape out(sizes);
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer_at < 0, "[", op, "] only one dim can be -1, got ", shape_str(sizes), ".");
      infer_at = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(out[i] >= 0, "[", op, "] invalid size ", out[i], " in ", shape_str(sizes), ".");
      std::optional<int64_t> product = checked_mul(known, out[i]);
      KILN_CHECK(product, "[", op, "] the shape ", shape_str(sizes),
                 " has more elements than a 64-bit size can count.");
      known = *product;
    }
  }
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 && total % known == 0, "[", op, "] cannot infer the -1 dim of ", shape_str(sizes),
               " for ", total, " elements.");
    out[infer_at] = total / known;
  }
  KILN_CHECK(numel(out) == total, "[", op, "] shape ", shape_str(sizes), " is invalid for ", total,
             " elements. Fix: pick a shape whose product is ", total, ".");
  return out;
}

bool viewable(const Tensor& x, IntList shape) {
  return ops::view_strides(x.sizes(), x.strides(), shape).has_value();
}

}  // namespace

Tensor view(const Tensor& x, IntList sizes) {
  ops::ShapeAttrs a;
  a.shape = infer_size(sizes, x.numel(), "view");
  return detail::call1(ops::view, {x}, a);
}

Tensor reshape(const Tensor& x, IntList sizes) {
  Shape shape = infer_size(sizes, x.numel(), "reshape");
  if (viewable(x, shape)) return view(x, shape);
  return view(clone(x), shape);
}

Tensor permute(const Tensor& x, IntList dims) {
  ops::PermuteAttrs a;
  a.dims = Shape(dims);
  return detail::call1(ops::permute, {x}, a);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  int64_t rank = x.dim();
  if (rank < 2 && (dim0 == 0 || dim0 == -1) && (dim1 == 0 || dim1 == -1)) return x;
  int64_t d0 = wrap_dim(dim0, rank, "transpose"), d1 = wrap_dim(dim1, rank, "transpose");
  Shape perm(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < rank; ++i) perm[i] = i;
  std::swap(perm[d0], perm[d1]);
  return permute(x, perm);
}

namespace {

// The tracer that records `end` as a symbolic size past a static dim of n, if one does: a
// trace with symbolic sizes reaching `pos[:, :x.size(1)]`. Eagerly the end would clamp to n;
// the trace keeps the symbol instead, bounded by n, so one graph serves every length up to n.
detail::Tracer* tracer_bounding(int64_t end, int64_t n) {
  if (end <= n || !holds_symbolic_size(end) || holds_symbolic_size(n)) return nullptr;
  return dynamic_cast<detail::Tracer*>(current_interceptor());
}

}  // namespace

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  KILN_CHECK(x.dim() > 0, "[slice] cannot slice a 0-d tensor.");
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  int64_t n = x.size(d);
  // Python semantics: negative indices count from the end; out-of-range bounds clamp.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  detail::Tracer* bounding = tracer_bounding(end, n);
  if (!bounding) end = std::clamp<int64_t>(end, start, n);
  ops::SliceAttrs a;
  a.dim = d;
  a.start = start;
  a.end = end;
  a.step = step;
  Tensor out = detail::call1(ops::slice, {x}, a);
  if (bounding) bounding->bound_size(out, end, n);
  return out;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  int64_t n = x.size(d);
  if (start < 0) start += n;
  KILN_CHECK(start >= 0 && length >= 0 && (start + length <= n || tracer_bounding(start + length, n)),
             "[narrow] start ", start, " and length ", length, " do not fit in dim ", dim, " of size ", n, ".");
  return slice(x, d, start, start + length);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  ops::SelectAttrs a;
  a.dim = dim;
  a.index = index;
  return detail::call1(ops::select, {x}, a);
}

Tensor expand(const Tensor& x, IntList sizes) {
  ops::ShapeAttrs a;
  a.shape = Shape(sizes);
  return detail::call1(ops::expand, {x}, a);
}

Tensor broadcast_to(const Tensor& x, IntList sizes) { return expand(x, sizes); }

Tensor squeeze(const Tensor& x) { return detail::call1(ops::squeeze, {x}, ops::DimsAttrs()); }

Tensor squeeze(const Tensor& x, int64_t dim) {
  ops::DimsAttrs a;
  a.dims = Shape{dim};
  return detail::call1(ops::squeeze, {x}, a);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.defined(), "[unbind] got an undefined tensor.");
  ops::DimAttrs a;
  a.dim = dim;
  Tensors out = detail::call(ops::unbind, TensorSpan(&x, 1), a);
  return std::vector<Tensor>(out.begin(), out.end());
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  ops::DimAttrs a;
  a.dim = dim;
  return detail::call1(ops::unsqueeze, {x}, a);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  int64_t s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  KILN_CHECK(s <= e, "[flatten] start_dim ", start_dim, " comes after end_dim ", end_dim, ".");
  Shape shape;
  for (int64_t i = 0; i < s; ++i) shape.push_back(x.size(i));
  int64_t mid = 1;
  for (int64_t i = s; i <= e; ++i) mid *= x.size(i);
  shape.push_back(mid);
  for (int64_t i = e + 1; i < x.dim(); ++i) shape.push_back(x.size(i));
  return reshape(x, shape);
}

Tensor as_strided(const Tensor& x, IntList sizes, IntList strides, int64_t offset) {
  ops::AsStridedAttrs a;
  a.sizes = Shape(sizes);
  a.strides = Shape(strides);
  a.offset = offset;
  return detail::call1(ops::as_strided, {x}, a);
}

Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t start, int64_t end, int64_t step) {
  ops::SliceAttrs a;
  a.dim = wrap_dim(dim, base.dim(), "slice_scatter");
  a.start = start;
  a.end = end;
  a.step = step;
  return detail::call1(ops::slice_scatter, {base, src.dtype() == base.dtype() ? src : cast(src, base.dtype())}, a);
}

Tensor clone(const Tensor& x) { return detail::call1(ops::clone, {x}); }

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

// ---- vjps ----

namespace {

Tensors one(Tensor t) { return Tensors{std::move(t)}; }
const Tensor& g_of(const VjpCall& c) { return c.grad_outputs[0]; }
IntList in_shape(const VjpCall& c) { return c.input_types[0].shape; }

Tensors vjp_view(const VjpCall& c) { return one(reshape(g_of(c), in_shape(c))); }
Tensors vjp_expand(const VjpCall& c) { return one(sum_to(g_of(c), in_shape(c))); }
Tensors vjp_permute(const VjpCall& c) {
  const auto& a = static_cast<const ops::PermuteAttrs&>(c.attrs);
  Shape inverse(a.dims.size(), 0);
  int64_t rank = static_cast<int64_t>(a.dims.size());
  for (int64_t i = 0; i < rank; ++i) inverse[wrap_dim(a.dims[i], rank, "permute")] = i;
  return one(permute(g_of(c), inverse));
}
Tensors vjp_slice(const VjpCall& c) {
  const auto& a = static_cast<const ops::SliceAttrs&>(c.attrs);
  Tensor base = zeros(in_shape(c), TensorOptions(g_of(c).dtype()).with_device(g_of(c).device()));
  return one(slice_scatter(base, g_of(c), a.dim, a.start, a.end, a.step));
}
Tensors vjp_select(const VjpCall& c) {
  const auto& a = static_cast<const ops::SelectAttrs&>(c.attrs);
  IntList shape = in_shape(c);
  int64_t d = wrap_dim(a.dim, static_cast<int64_t>(shape.size()), "select");
  int64_t idx = a.index < 0 ? a.index + shape[d] : a.index;
  Tensor base = zeros(shape, TensorOptions(g_of(c).dtype()).with_device(g_of(c).device()));
  return one(slice_scatter(base, unsqueeze(g_of(c), d), d, idx, idx + 1, 1));
}
Tensors vjp_reshape_back(const VjpCall& c) { return one(reshape(g_of(c), in_shape(c))); }
// as_strided reads storage positions offset + sum_k i_k * stride_k. For an input that is
// contiguous at offset 0, storage position p is input element p, so the gradient adds each
// output element's gradient at its position (overlapping windows accumulate).
Tensors vjp_as_strided(const VjpCall& c) {
  const auto& a = static_cast<const ops::AsStridedAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const Tensor& g = g_of(c);
  KILN_CHECK(x.defined(),
             "[as_strided] backward needs the input's geometry, but the input was not saved. "
             "Fix: make sure kiln::init() ran (it sets as_strided's vjp and what it saves).");
  KILN_CHECK(x.is_contiguous() && x.storage_offset() == 0,
             "[as_strided] backward supports inputs that are contiguous at storage offset 0, got ",
             x.type_str(), " with strides ", shape_str(x.strides()), " and offset ",
             x.storage_offset(), ". Fix: call .clone() (a fresh contiguous copy) before "
             "as_strided, or use view/permute/slice/expand, which are differentiable on any layout.");
  int64_t n = x.numel();
  TensorOptions opts = TensorOptions(g.dtype()).with_device(g.device());
  if (numel(a.sizes) == 0) return one(zeros(in_shape(c), opts));
  int64_t last = a.offset;
  for (size_t k = 0; k < a.sizes.size(); ++k) last += (a.sizes[k] - 1) * a.strides[k];
  KILN_CHECK(last < n, "[as_strided] backward: the view reads storage element ", last,
             " but the input ", x.type_str(), " has only ", n, " elements, so that gradient has "
             "nowhere to go. Fix: keep the view inside the input.");
  Tensor pos = Tensor::scalar(a.offset, kInt64, g.device());
  int64_t rank = static_cast<int64_t>(a.sizes.size());
  for (int64_t k = 0; k < rank; ++k) {
    Shape along(static_cast<size_t>(rank), 1);
    along[k] = a.sizes[k];
    pos = pos + reshape(arange(0, a.sizes[k], 1, TensorOptions(kInt64).with_device(g.device())) * a.strides[k], along);
  }
  Tensor flat = index_add(zeros({n}, opts), 0, reshape(pos, {-1}), reshape(g, {-1}));
  return one(reshape(flat, in_shape(c)));
}
Tensors vjp_clone(const VjpCall& c) { return one(g_of(c)); }
// The slices' gradients stacked back along dim (zeros for slices that got none).
Tensors vjp_unbind(const VjpCall& c) {
  const TensorType& in = c.input_types[0];
  const int64_t d = wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim, static_cast<int64_t>(in.shape.size()),
                             "unbind");
  Shape slice_shape = in.shape;
  slice_shape.erase(slice_shape.begin() + d);
  std::vector<Tensor> parts;
  for (const Tensor& g : c.grad_outputs)
    parts.push_back(g.defined() ? g : zeros(slice_shape, TensorOptions(in.dtype).with_device(in.device)));
  return one(stack(parts, d));
}

Tensors vjp_slice_scatter(const VjpCall& c) {
  const auto& a = static_cast<const ops::SliceAttrs&>(c.attrs);
  const Tensor& g = g_of(c);
  Tensor gbase, gsrc;
  if (c.needs(0)) gbase = slice_scatter(g, zeros(c.input_types[1].shape, TensorOptions(g.dtype()).with_device(g.device())), a.dim, a.start, a.end, a.step);
  if (c.needs(1)) gsrc = slice(g, a.dim, a.start, a.end, a.step);
  return Tensors{gbase, gsrc};
}

}  // namespace

namespace detail {

void register_view_vjps() {
  set_vjp(ops::view, vjp_view, kSavesNothing);
  set_vjp(ops::expand, vjp_expand, kSavesNothing);
  set_vjp(ops::permute, vjp_permute, kSavesNothing);
  set_vjp(ops::slice, vjp_slice, kSavesNothing);
  set_vjp(ops::select, vjp_select, kSavesNothing);
  set_vjp(ops::squeeze, vjp_reshape_back, kSavesNothing);
  set_vjp(ops::unsqueeze, vjp_reshape_back, kSavesNothing);
  // as_strided's vjp maps the view back onto the input's storage positions, so it needs
  // the input's strides and offset, which only the saved input carries.
  set_vjp(ops::as_strided, vjp_as_strided, {.inputs = 1});
  set_vjp(ops::clone, vjp_clone, kSavesNothing);
  set_vjp(ops::slice_scatter, vjp_slice_scatter, kSavesNothing);
  set_vjp(ops::unbind, vjp_unbind, kSavesNothing);
}

}  // namespace detail
}  // namespace kiln
