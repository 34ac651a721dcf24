// Definitions of the layout ops (cat and the index ops).
#include "kiln/ops/layout.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

constexpr auto L = LoweringClass::Layout;

int64_t dim_of(const InferCall& c) {
  return static_cast<const DimAttrs&>(c.attrs).dim;
}

// PyTorch's legacy rule: a 1-D tensor with no elements joins anything.
bool skipped_by_cat(const Tensor& t) {
  return t.dim() == 1 && t.size(0) == 0;
}

void infer_cat(InferCall& c) {
  KILN_CHECK(!c.inputs.empty(),
             "[cat] expected a non-empty list of tensors. Fix: pass at least one tensor.");
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    KILN_CHECK(t.defined(), "[cat] tensor ", i, " is undefined.");
    infer::check_compute_dtype(c, i);
    KILN_CHECK(t.dim() > 0, "[cat] tensor ", i,
               " is 0-d and cannot be concatenated. Fix: unsqueeze it (x.unsqueeze(0)) or use "
               "kiln::stack.");
    KILN_CHECK(t.dtype() == c.inputs[0].dtype(), "[cat] expected tensors of one dtype, got ",
               c.inputs[0].dtype(), " (tensor 0) and ", t.dtype(), " (tensor ", i,
               "). Fix: use kiln::cat (it promotes) or .to().");
    if (!ref && !skipped_by_cat(t)) ref = &t;
  }
  if (!ref) {  // every input is [0]
    c.outputs.push_back({c.inputs[0].dtype(), Shape{0}, c.inputs[0].device()});
    return;
  }
  int64_t d = wrap_dim(dim_of(c), ref->dim(), "cat");
  Shape out(ref->sizes());
  out[d] = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    if (skipped_by_cat(t)) continue;
    KILN_CHECK(t.dim() == ref->dim(), "[cat] expected tensors of one rank, got ", ref->type_str(),
               " and ", t.type_str(), " (tensor ", i,
               "). Fix: reshape or unsqueeze them to the same rank.");
    for (int64_t k = 0; k < t.dim(); ++k)
      KILN_CHECK(k == d || t.size(k) == out[k], "[cat] sizes must match except in dim ", d,
                 ", but tensor ", i, " has shape ", shape_str(t.sizes()), " and the first has ",
                 shape_str(ref->sizes()), " (dim ", k, ": ", t.size(k), " vs ", out[k],
                 "). Fix: concatenate along dim ", k, ", or make the other dims equal.");
    out[d] = size_add(out[d], t.size(d), "[cat] the concatenated dim");
  }
  c.outputs.push_back({ref->dtype(), out, ref->device()});
}

void check_index(const InferCall& c, size_t i) {
  const Tensor& idx = c.inputs[i];
  KILN_CHECK(idx.dtype() == DType::Int64, "[", c.op.name, "] expected an int64 index, got ",
             idx.dtype(), ". Fix: convert it with .to(kiln::kInt64).");
}

void infer_gather(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_compute_dtype(c, 0);
  check_index(c, 1);
  const Tensor &x = c.inputs[0], &idx = c.inputs[1];
  int64_t d = wrap_dim(dim_of(c), x.dim(), "gather");
  KILN_CHECK(idx.dim() == x.dim(), "[gather] expected an index of the input's rank ", x.dim(),
             ", got ", idx.type_str(), ". Fix: unsqueeze/expand the index to ", x.dim(), " dims.");
  for (int64_t k = 0; k < x.dim(); ++k)
    KILN_CHECK(k == d || idx.size(k) <= x.size(k), "[gather] index shape ", shape_str(idx.sizes()),
               " is larger than input shape ", shape_str(x.sizes()), " in dim ", k, " (only dim ",
               d, " may be larger). Fix: narrow the index.");
  c.outputs.push_back({x.dtype(), Shape(idx.sizes()), x.device()});
}

// scatter_add and scatter_reduce: x, index and src share a rank; the index fits in src, and
// in x but along dim.
void check_scatter(InferCall& c, int64_t dim) {
  infer::check_arity(c, 3);
  infer::check_compute_dtype(c, 0);
  check_index(c, 1);
  const char* op = c.op.name.c_str();
  const Tensor &x = c.inputs[0], &idx = c.inputs[1], &src = c.inputs[2];
  KILN_CHECK(src.dtype() == x.dtype(), "[", op, "] expected src of the input's dtype ", x.dtype(), ", got ",
             src.dtype(), ". Fix: use kiln::", op, " (it converts) or .to().");
  int64_t d = wrap_dim(dim, x.dim(), op);
  KILN_CHECK(idx.dim() == x.dim() && src.dim() == x.dim(), "[", op,
             "] expected input, index and src of one rank, got ", x.type_str(), ", ", idx.type_str(), " and ",
             src.type_str(), ".");
  for (int64_t k = 0; k < x.dim(); ++k) {
    KILN_CHECK(idx.size(k) <= src.size(k), "[", op, "] index shape ", shape_str(idx.sizes()),
               " is larger than src shape ", shape_str(src.sizes()), " in dim ", k, ". Fix: narrow the index.");
    KILN_CHECK(k == d || idx.size(k) <= x.size(k), "[", op, "] index shape ", shape_str(idx.sizes()),
               " is larger than input shape ", shape_str(x.sizes()), " in dim ", k, " (only dim ", d,
               " may be larger). Fix: narrow the index.");
  }
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

void infer_scatter_add(InferCall& c) {
  check_scatter(c, dim_of(c));
}

void infer_scatter_reduce(InferCall& c) {
  const auto& a = static_cast<const ScatterReduceAttrs&>(c.attrs);
  const bool known = a.reduce == "sum" || a.reduce == "prod" || a.reduce == "mean" || a.reduce == "amax" ||
                     a.reduce == "amin" || a.reduce == "replace";
  KILN_CHECK(known, "[scatter_reduce] expected reduce \"sum\", \"prod\", \"mean\", \"amax\", \"amin\" or "
             "\"replace\", got \"", a.reduce, "\".");
  check_scatter(c, a.dim);
  KILN_CHECK(c.inputs[0].dtype() != DType::Bool || a.reduce == "replace", "[scatter_reduce] reduce \"", a.reduce,
             "\" takes numbers, got a bool tensor. Fix: convert with .to(kiln::kInt64), or use logical ops.");
}

// index_select/index_add: the index is a list.
void check_index_list(const InferCall& c, const Tensor& idx) {
  KILN_CHECK(idx.dim() <= 1, "[", c.op.name, "] expected a 1-D index, got ", idx.type_str(),
             ". Fix: flatten it with .reshape({-1}).");
}

// x's shape with dim `d` resized to `n` (0-d x stays 0-d).
Shape with_dim(const Tensor& x, int64_t d, int64_t n) {
  Shape s(x.sizes());
  if (x.dim() > 0) s[d] = n;
  return s;
}

void infer_index_select(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_compute_dtype(c, 0);
  check_index(c, 1);
  const Tensor &x = c.inputs[0], &idx = c.inputs[1];
  check_index_list(c, idx);
  int64_t d = wrap_dim(dim_of(c), x.dim(), "index_select");
  KILN_CHECK(x.dim() > 0 || idx.numel() == 1,
             "[index_select] a 0-d input takes an index of one element, got ", idx.type_str(), ".");
  c.outputs.push_back({x.dtype(), with_dim(x, d, idx.numel()), x.device()});
}

void infer_index_add(InferCall& c) {
  infer::check_arity(c, 3);
  infer::check_compute_dtype(c, 0);
  check_index(c, 1);
  const Tensor &x = c.inputs[0], &idx = c.inputs[1], &src = c.inputs[2];
  check_index_list(c, idx);
  KILN_CHECK(src.dtype() == x.dtype(), "[index_add] expected src of the input's dtype ", x.dtype(),
             ", got ", src.dtype(), ". Fix: use kiln::index_add (it converts) or .to().");
  int64_t d = wrap_dim(dim_of(c), x.dim(), "index_add");
  Shape want = with_dim(x, d, idx.numel());
  KILN_CHECK(Shape(src.sizes()) == want && (x.dim() > 0 || idx.numel() == 1),
             "[index_add] expected src of shape ", shape_str(want), " (the input's shape with dim ",
             d, " = the index length ", idx.numel(), "), got ", shape_str(src.sizes()), ".");
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

}  // namespace

OpDef cat("cat", {"tensors", "..."}, infer_cat, L, attrs_of<DimAttrs>());
OpDef gather("gather", {"x", "index"}, infer_gather, L, attrs_of<DimAttrs>(),
             {.nondiff_inputs = 0b10 /* the index */});
OpDef scatter_add("scatter_add", {"x", "index", "src"}, infer_scatter_add, L, attrs_of<DimAttrs>(),
                  {.nondiff_inputs = 0b10 /* the index */});
OpDef scatter_reduce("scatter_reduce", {"x", "index", "src"}, infer_scatter_reduce, LoweringClass::Opaque,
                      attrs_of<ScatterReduceAttrs>(), {.nondiff_inputs = 0b10 /* the index */});
OpDef index_select("index_select", {"x", "index"}, infer_index_select, L, attrs_of<DimAttrs>(),
                   {.nondiff_inputs = 0b10 /* the index */});
OpDef index_add("index_add", {"x", "index", "src"}, infer_index_add, L, attrs_of<DimAttrs>(),
                {.nondiff_inputs = 0b10 /* the index */});

}  // namespace kiln::ops
