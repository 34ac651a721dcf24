// View ops: infer and their kernels. A view's kernel only computes sizes, strides and an
// offset, so the same kernel serves every device and the runtime installs it in all slots.
#include "kiln/ops/view.h"

#include "kiln/ops/infer_util.h"
#include "kiln/symbolic_size.h"

namespace kiln::ops {

namespace {

constexpr auto V = LoweringClass::View;

void push(InferCall& c, Shape shape) {
  c.outputs.push_back({c.inputs[0].dtype(), std::move(shape), c.inputs[0].device()});
}

void infer_view(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const ShapeAttrs&>(c.attrs);
  for (int64_t s : a.shape)
    KILN_CHECK(s >= 0, "[view] expected sizes >= 0, got ", shape_str(a.shape),
               ". Fix: resolve -1 before building the node (kiln::view does).");
  KILN_CHECK(numel(a.shape) == c.inputs[0].numel(), "[view] cannot view ", c.inputs[0].type_str(), " (",
             c.inputs[0].numel(), " elements) as ", shape_str(a.shape), " (", numel(a.shape),
             " elements). Fix: pick a shape with the same number of elements.");
  push(c, a.shape);
}

void view_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const ShapeAttrs&>(c.attrs);
  auto strides = view_strides(x.sizes(), x.strides(), a.shape);
  KILN_CHECK(strides, "[view] cannot view ", x.type_str(), " with strides ", shape_str(x.strides()), " as ",
             shape_str(a.shape), " without copying. Fix: use reshape() (copies when needed) or call "
             ".contiguous() first.");
  c.outputs[0] = x.alias(a.shape, *strides, x.storage_offset());
}

void infer_expand(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const ShapeAttrs&>(c.attrs);
  IntList in = c.inputs[0].sizes();
  KILN_CHECK(a.shape.size() >= in.size(), "[expand] cannot expand ", shape_str(in), " to fewer dims ",
             shape_str(a.shape), ".");
  size_t lead = a.shape.size() - in.size();
  Shape out(a.shape);
  for (size_t i = 0; i < a.shape.size(); ++i) {
    int64_t want = a.shape[i];
    if (i < lead) {
      KILN_CHECK(want >= 0, "[expand] size -1 is not allowed for new leading dim ", i, ".");
      continue;
    }
    int64_t have = in[i - lead];
    if (want == -1) want = have;
    KILN_CHECK(want >= 0, "[expand] expected sizes >= 0 (or -1 to keep a dim), got ",
               shape_str(a.shape), ".");
    KILN_CHECK(have == want || have == 1, "[expand] cannot expand ", shape_str(in), " to ",
               shape_str(a.shape), ": dim ", i, " has size ", have, " (only size-1 dims expand).");
    out[i] = want;
  }
  numel(out);  // a kiln::Error naming the shape when its element count leaves int64
  push(c, out);
}

void expand_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Shape& out = c.output_types[0].shape;
  size_t lead = out.size() - static_cast<size_t>(x.dim());
  Shape strides(out.size(), 0);
  for (size_t i = lead; i < out.size(); ++i)
    strides[i] = x.sizes()[i - lead] == out[i] ? x.strides()[i - lead] : 0;
  c.outputs[0] = x.alias(out, strides, x.storage_offset());
}

void infer_permute(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const PermuteAttrs&>(c.attrs);
  int64_t rank = c.inputs[0].dim();
  KILN_CHECK(static_cast<int64_t>(a.dims.size()) == rank, "[permute] expected ", rank, " dims for a tensor of shape ",
             shape_str(c.inputs[0].sizes()), ", got ", shape_str(a.dims), ".");
  Shape out(static_cast<size_t>(rank), 0);
  uint64_t seen = 0;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t d = wrap_dim(a.dims[i], rank, "permute");
    KILN_CHECK(!(seen & (1ull << d)), "[permute] dim ", a.dims[i], " repeats in ", shape_str(a.dims),
               ". Fix: list every dim exactly once.");
    seen |= 1ull << d;
    out[i] = c.inputs[0].sizes()[d];
  }
  push(c, out);
}

void permute_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const PermuteAttrs&>(c.attrs);
  Shape sizes(a.dims.size(), 0), strides(a.dims.size(), 0);
  for (size_t i = 0; i < a.dims.size(); ++i) {
    int64_t d = wrap_dim(a.dims[i], x.dim(), "permute");
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
  }
  c.outputs[0] = x.alias(sizes, strides, x.storage_offset());
}

void infer_slice(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const SliceAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() > 0, "[slice] cannot slice a 0-d tensor.");
  int64_t d = wrap_dim(a.dim, x.dim(), "slice");
  KILN_CHECK(a.step > 0, "[slice] step must be positive, got ", a.step, ".");
  const int64_t n = x.sizes()[d];
  // A symbolic end past a static dim is a traced `pos[:, :x.size(1)]`: exact while the
  // symbol stays within the dim, which the graph's SizeBound guarantees.
  const bool bounded_symbol = a.end > n && holds_symbolic_size(a.end) && !holds_symbolic_size(n);
  KILN_CHECK(0 <= a.start && a.start <= a.end && (a.end <= n || bounded_symbol), "[slice] range [", a.start,
             ", ", a.end, ") is outside dim ", a.dim, " of size ", n, ".");
  Shape out(x.sizes());
  out[d] = (a.end - a.start + a.step - 1) / a.step;
  push(c, out);
}

void slice_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const SliceAttrs&>(c.attrs);
  int64_t d = wrap_dim(a.dim, x.dim(), "slice");
  // The tracer runs view kernels on storage-less tensors for their strides alone.
  if (x.impl()->storage) check_slice_fits(a, x.sizes()[d], "slice");
  Shape strides(x.strides());
  strides[d] *= a.step;
  c.outputs[0] = x.alias(c.output_types[0].shape, strides, x.storage_offset() + a.start * x.strides()[d]);
}

void infer_select(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const SelectAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() > 0, "[select] cannot index a 0-d tensor. Fix: use item() to read it.");
  int64_t d = wrap_dim(a.dim, x.dim(), "select");
  int64_t n = x.sizes()[d];
  KILN_CHECK(a.index >= -n && a.index < n, "[select] index ", a.index, " is out of range for dim ", a.dim,
             " of size ", n, " (shape ", shape_str(x.sizes()), ").");
  Shape out(x.sizes());
  out.erase(out.begin() + d);
  push(c, out);
}

void select_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& a = static_cast<const SelectAttrs&>(c.attrs);
  int64_t d = wrap_dim(a.dim, x.dim(), "select");
  int64_t idx = a.index < 0 ? a.index + x.sizes()[d] : a.index;
  Shape strides(x.strides());
  strides.erase(strides.begin() + d);
  c.outputs[0] = x.alias(c.output_types[0].shape, strides, x.storage_offset() + idx * x.strides()[d]);
}

void infer_unbind(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() > 0, "[unbind] cannot unbind a 0-d tensor.");
  const int64_t d = wrap_dim(static_cast<const DimAttrs&>(c.attrs).dim, x.dim(), "unbind");
  const int64_t n = x.sizes()[d];
  KILN_CHECK(!holds_symbolic_size(n), "[unbind] dim ", d, " has a dynamic size, but unbind makes one output per "
             "element of it. Fix: scan over the dim (kiln::scan), or keep it static.");
  Shape out(x.sizes());
  out.erase(out.begin() + d);
  for (int64_t i = 0; i < n; ++i) push(c, out);
}

void unbind_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const int64_t d = wrap_dim(static_cast<const DimAttrs&>(c.attrs).dim, x.dim(), "unbind");
  Shape strides(x.strides());
  strides.erase(strides.begin() + d);
  for (size_t i = 0; i < c.outputs.size(); ++i)
    c.outputs[i] = x.alias(c.output_types[i].shape, strides,
                           x.storage_offset() + static_cast<int64_t>(i) * x.strides()[d]);
}

uint64_t squeeze_mask(const Tensor& x, const DimsAttrs& a) {
  uint64_t mask = 0;
  if (a.dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i)
      if (x.sizes()[i] == 1) mask |= 1ull << i;
    return mask;
  }
  for (int64_t d : a.dims) {
    int64_t w = wrap_dim(d, x.dim(), "squeeze");
    if (x.dim() > 0 && x.sizes()[w] == 1) mask |= 1ull << w;  // like PyTorch: others stay
  }
  return mask;
}

void infer_squeeze(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  uint64_t mask = squeeze_mask(x, static_cast<const DimsAttrs&>(c.attrs));
  Shape out;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!(mask & (1ull << i))) out.push_back(x.sizes()[i]);
  push(c, out);
}

void squeeze_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  uint64_t mask = squeeze_mask(x, static_cast<const DimsAttrs&>(c.attrs));
  Shape strides;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!(mask & (1ull << i))) strides.push_back(x.strides()[i]);
  c.outputs[0] = x.alias(c.output_types[0].shape, strides, x.storage_offset());
}

void infer_unsqueeze(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  int64_t d = wrap_dim(static_cast<const DimAttrs&>(c.attrs).dim, x.dim() + 1, "unsqueeze");
  Shape out(x.sizes());
  out.insert(out.begin() + d, 1);
  push(c, out);
}

void unsqueeze_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  int64_t d = wrap_dim(static_cast<const DimAttrs&>(c.attrs).dim, x.dim() + 1, "unsqueeze");
  Shape strides(x.strides());
  int64_t s = d < x.dim() ? x.sizes()[d] * x.strides()[d] : 1;
  strides.insert(strides.begin() + d, s);
  c.outputs[0] = x.alias(c.output_types[0].shape, strides, x.storage_offset());
}

void infer_as_strided(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const AsStridedAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(a.sizes.size() == a.strides.size(), "[as_strided] got ", a.sizes.size(), " sizes but ",
             a.strides.size(), " strides.");
  int64_t last = a.offset;
  for (size_t i = 0; i < a.sizes.size(); ++i) {
    KILN_CHECK(a.sizes[i] >= 0 && a.strides[i] >= 0, "[as_strided] sizes and strides must be non-negative, got ",
               shape_str(a.sizes), " and ", shape_str(a.strides), ".");
    last += (a.sizes[i] - 1) * a.strides[i];
  }
  if (x.impl()->storage && numel(a.sizes) > 0) {
    int64_t capacity = static_cast<int64_t>(x.impl()->storage->nbytes() / x.element_size());
    KILN_CHECK(a.offset >= 0 && last < capacity, "[as_strided] sizes ", shape_str(a.sizes), ", strides ",
               shape_str(a.strides), " and offset ", a.offset, " reach element ", last,
               " but the storage holds ", capacity, " elements.");
  }
  push(c, a.sizes);
}

void as_strided_kernel(KernelCall& c) {
  const auto& a = static_cast<const AsStridedAttrs&>(c.attrs);
  c.outputs[0] = c.inputs[0].alias(a.sizes, a.strides, a.offset);
}

void infer_slice_scatter(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_same_dtype(c);
  TensorTypes sliced;
  InferCall inner{slice, c.inputs.subspan(0, 1), c.attrs, sliced};
  infer_slice(inner);
  KILN_CHECK(sliced[0].shape == Shape(c.inputs[1].sizes()), "[slice_scatter] the slice has shape ",
             shape_str(sliced[0].shape), " but src has shape ", shape_str(c.inputs[1].sizes()), ".");
  push(c, Shape(c.inputs[0].sizes()));
}

void infer_clone(InferCall& c) {
  infer::check_arity(c, 1);
  push(c, Shape(c.inputs[0].sizes()));
}

void detach_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  c.outputs[0] = x.alias(x.sizes(), x.strides(), x.storage_offset());
}

// A view's kernel only makes an alias, so it serves every device.
OpTraits a_view(KernelFn kernel) {
  return {.every_device_kernel = kernel, .kernel_makes_outputs = true};
}

}  // namespace

void check_slice_fits(const SliceAttrs& a, int64_t size, const char* op) {
  KILN_CHECK(0 <= a.start && a.start <= a.end && a.end <= size, "[", op, "] range [", a.start, ", ", a.end,
             ") is outside dim ", a.dim, " of size ", size,
             ". Fix: a compiled graph's slice end beyond its dim means a size bound went unchecked; "
             "run it through kiln::compile or a loaded artifact, which check the bounds.");
}

// Algorithm: walk the input dims from the innermost, cutting them into chunks that are
// contiguous with each other; each chunk must be exactly covered by consecutive dims of
// the new shape, which get strides inside that chunk.
std::optional<Shape> view_strides(IntList sizes, IntList strides, IntList shape) {
  Shape out(shape.size(), 0);
  if (numel(sizes) == 0 || sizes.empty()) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

OpDef view("view", {"x"}, infer_view, V, attrs_of<ShapeAttrs>(), a_view(view_kernel));
OpDef expand("expand", {"x"}, infer_expand, V, attrs_of<ShapeAttrs>(), a_view(expand_kernel));
OpDef permute("permute", {"x"}, infer_permute, V, attrs_of<PermuteAttrs>(), a_view(permute_kernel));
OpDef slice("slice", {"x"}, infer_slice, V, attrs_of<SliceAttrs>(), a_view(slice_kernel));
OpDef select("select", {"x"}, infer_select, V, attrs_of<SelectAttrs>(), a_view(select_kernel));
OpDef unbind("unbind", {"x"}, infer_unbind, V, attrs_of<DimAttrs>(), a_view(unbind_kernel));
OpDef squeeze("squeeze", {"x"}, infer_squeeze, V, attrs_of<DimsAttrs>(), a_view(squeeze_kernel));
OpDef unsqueeze("unsqueeze", {"x"}, infer_unsqueeze, V, attrs_of<DimAttrs>(),
                a_view(unsqueeze_kernel));
OpDef as_strided("as_strided", {"x"}, infer_as_strided, V, attrs_of<AsStridedAttrs>(),
                 a_view(as_strided_kernel));
OpDef slice_scatter("slice_scatter", {"base", "src"}, infer_slice_scatter, LoweringClass::Layout,
                    attrs_of<SliceAttrs>());
OpDef clone("clone", {"x"}, infer_clone, LoweringClass::Layout);
OpDef detach("detach", {"x"}, infer_clone, LoweringClass::View,
             {.differentiable = false,
              .every_device_kernel = detach_kernel,
              .kernel_makes_outputs = true});

}  // namespace kiln::ops
