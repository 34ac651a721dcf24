// Advanced indexing as compositions of table ops: the indexed dims are moved first and
// flattened, the index tensors become one row-major position per element, and index_select
// (reading), scatter or index_add (writing) do the rest. Bool masks become positions through
// nonzero; a mask written with one value is a `where`.
#include "kiln/tensor_ops/indexing.h"

#include <algorithm>

#include "kiln/dispatch.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/selection.h"

namespace kiln {

namespace {

// What an index list selects in x.
struct IndexPlan {
  std::vector<int64_t> dims;    // the indexed dims of x, ascending
  std::vector<Tensor> indices;  // int64, one per entry of dims, broadcast to `shape`, in [0, size)
  Shape shape;                  // the broadcast shape B of the index tensors
  int64_t insert_at = 0;        // where B goes among the result's dims
  std::vector<int64_t> order;   // x's dims with the indexed ones first (a permutation)
};

// The positions `i` picks along dim `d` of x, wrapped into [0, size). Eagerly the range is
// checked here, so the error names the dim rather than the flattened position.
Tensor positions_along(const Tensor& x, int64_t d, Tensor i, const char* op) {
  const int64_t size = x.size(d);
  if (i.dtype() == kInt32) i = cast(i, kInt64);
  if (!current_interceptor() && i.numel() > 0) {
    const int64_t low = i.min().item<int64_t>(), high = i.max().item<int64_t>();
    const int64_t bad = low < -size ? low : high;
    KILN_CHECK(low >= -size && high < size, "[", op, "] index ", bad, " is out of range for dim ", d, " of size ",
               size, " (expected ", -size, " <= index < ", size, "). Fix: check the index tensor.");
  }
  return where(i < 0, i + size, i);
}

// A bool mask must cover dims [dim, dim + mask.dim()) of x exactly.
void check_mask(const Tensor& x, const Tensor& mask, int64_t dim, const char* op) {
  KILN_CHECK(mask.dim() > 0 && dim + mask.dim() <= x.dim(), "[", op, "] a bool mask of shape ",
             shape_str(mask.sizes()), " at dim ", dim, " does not fit x of shape ", shape_str(x.sizes()),
             ". Fix: pass a mask shaped like the dims it selects from.");
  for (int64_t k = 0; k < mask.dim(); ++k)
    KILN_CHECK(mask.size(k) == x.size(dim + k), "[", op, "] the mask's dim ", k, " has size ", mask.size(k),
               " but x's dim ", dim + k, " has size ", x.size(dim + k),
               ". Fix: pass a mask shaped like the dims it selects from.");
}

IndexPlan plan_index(const Tensor& x, const std::vector<Tensor>& indices, const char* op, SourceLoc loc) {
  KILN_CHECK(x.defined(), "[", op, "] got an undefined tensor.");
  IndexPlan p;
  std::vector<Tensor> picked;
  int64_t dim = 0;
  for (const Tensor& i : indices) {
    if (!i.defined()) {
      ++dim;
      continue;
    }
    if (i.dtype() == kBool) {
      check_mask(x, i, dim, op);
      const Tensor where_true = nonzero(i, std::nullopt, 0, loc);  // [count, i.dim()]
      for (int64_t k = 0; k < i.dim(); ++k) {
        p.dims.push_back(dim + k);
        picked.push_back(where_true.select(1, k));
      }
      dim += i.dim();
      continue;
    }
    KILN_CHECK(i.dtype() == kInt64 || i.dtype() == kInt32, "[", op,
               "] expected int64, int32 or bool index tensors, got ", i.type_str(),
               ". Fix: convert the index with .to(kiln::kInt64).");
    KILN_CHECK(dim < x.dim(), "[", op, "] too many indices for a tensor of shape ", shape_str(x.sizes()), ".");
    p.dims.push_back(dim);
    picked.push_back(i);
    ++dim;
  }
  KILN_CHECK(dim <= x.dim(), "[", op, "] too many indices for a tensor of shape ", shape_str(x.sizes()), ".");
  KILN_CHECK(!picked.empty(), "[", op, "] expected at least one index tensor. Fix: for plain slices use "
             "slice/narrow/select.");
  p.shape = Shape(picked[0].sizes());
  for (const Tensor& t : picked) p.shape = broadcast_shapes(p.shape, t.sizes(), op);
  for (size_t k = 0; k < picked.size(); ++k)
    p.indices.push_back(positions_along(x, p.dims[k], picked[k], op).expand(p.shape));
  const bool adjacent = p.dims.back() - p.dims.front() + 1 == static_cast<int64_t>(p.dims.size());
  p.insert_at = adjacent ? p.dims.front() : 0;
  p.order = p.dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(p.dims.begin(), p.dims.end(), d) == p.dims.end()) p.order.push_back(d);
  return p;
}

// x with the indexed dims first, flattened into one: [positions, rest...].
Tensor flattened(const Tensor& x, const IndexPlan& p, Shape& rest) {
  int64_t positions = 1;
  for (int64_t d : p.dims) positions *= x.size(d);
  rest.clear();
  for (size_t k = p.dims.size(); k < p.order.size(); ++k) rest.push_back(x.size(p.order[k]));
  Shape shape{positions};
  for (int64_t s : rest) shape.push_back(s);
  return x.permute(Shape(p.order)).reshape(shape);
}

// Every element's row-major position among the indexed dims, flattened.
Tensor linear_positions(const Tensor& x, const IndexPlan& p) {
  Tensor linear = p.indices[0];
  for (size_t k = 1; k < p.indices.size(); ++k) linear = linear * x.size(p.dims[k]) + p.indices[k];
  return linear.reshape({-1});
}

// The permutation taking [B..., rest...] to the result's layout (B at insert_at), or back.
Shape result_order(const IndexPlan& p, size_t rest_dims, bool inverse) {
  const int64_t b = static_cast<int64_t>(p.shape.size());
  Shape order;
  for (int64_t k = 0; k < p.insert_at; ++k) order.push_back(b + k);  // rest dims before x's first indexed dim
  for (int64_t k = 0; k < b; ++k) order.push_back(k);
  for (int64_t k = p.insert_at; k < static_cast<int64_t>(rest_dims); ++k) order.push_back(b + k);
  if (!inverse) return order;
  Shape back(order.size());
  for (size_t k = 0; k < order.size(); ++k) back[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  return back;
}

Shape concat(const Shape& a, const Shape& b) {
  Shape out = a;
  for (int64_t s : b) out.push_back(s);
  return out;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<Tensor>& indices, SourceLoc loc) {
  const IndexPlan p = plan_index(x, indices, "index", loc);
  Shape rest;
  const Tensor flat = flattened(x, p, rest);
  const Tensor picked = index_select(flat, 0, linear_positions(x, p)).reshape(concat(p.shape, rest));
  return p.insert_at == 0 ? picked : picked.permute(result_order(p, rest.size(), false));
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate,
                 SourceLoc loc) {
  KILN_CHECK(x.defined() && values.defined(), "[index_put] got an undefined tensor.");
  // One bool mask written with one value: a where, with no data-dependent size.
  const auto defined = std::count_if(indices.begin(), indices.end(), [](const Tensor& t) { return t.defined(); });
  if (defined == 1 && values.numel() == 1) {
    size_t at = 0;
    while (!indices[at].defined()) ++at;
    const Tensor& mask = indices[at];
    const int64_t dim = static_cast<int64_t>(at);
    if (mask.dtype() == kBool) {
      check_mask(x, mask, dim, "index_put");
      Shape shape(static_cast<size_t>(dim), 1);
      for (int64_t s : mask.sizes()) shape.push_back(s);
      shape.resize(static_cast<size_t>(x.dim()), 1);
      const Tensor m = mask.reshape(shape), v = cast(values, x.dtype()).reshape({});
      return accumulate ? x + where(m, v, 0) : where(m, v, x);
    }
  }
  const IndexPlan p = plan_index(x, indices, "index_put", loc);
  Shape rest;
  const Tensor flat = flattened(x, p, rest);
  const int64_t count = numel(p.shape);
  // values broadcast to the indexing result's shape, brought to [B..., rest...].
  Shape result_shape = concat(p.shape, rest);
  if (p.insert_at != 0) {
    const Shape order = result_order(p, rest.size(), false);
    Shape permuted;
    for (int64_t k : order) permuted.push_back(result_shape[static_cast<size_t>(k)]);
    result_shape = permuted;
  }
  Tensor v = cast(values, x.dtype()).expand(result_shape);
  if (p.insert_at != 0) v = v.permute(result_order(p, rest.size(), true));
  v = v.reshape(concat({count}, rest));
  const Tensor linear = linear_positions(x, p);
  Tensor written;
  if (accumulate) {
    written = index_add(flat, 0, linear, v);
  } else {
    Shape column(rest.size() + 1, 1);
    column[0] = count;
    written = scatter(flat, 0, linear.reshape(column).expand(concat({count}, rest)), v);
  }
  Shape moved;
  for (int64_t d : p.order) moved.push_back(x.size(d));
  Shape back(p.order.size());
  for (size_t k = 0; k < p.order.size(); ++k) back[static_cast<size_t>(p.order[k])] = static_cast<int64_t>(k);
  return written.reshape(moved).permute(back);
}

Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate,
                   SourceLoc loc) {
  x.copy_(index_put(x, indices, values, accumulate, loc));
  return x;
}

}  // namespace kiln
