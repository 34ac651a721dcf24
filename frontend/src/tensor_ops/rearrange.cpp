// flip, roll, repeat, tile, repeat_interleave and the diagonals as compositions of table ops
// (kiln/tensor_ops/rearrange.h).
#include "kiln/tensor_ops/rearrange.h"

#include <algorithm>
#include <set>

#include "kiln/error.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/random.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {

// `dims` wrapped into [0, rank), each at most once.
std::vector<int64_t> distinct_dims(IntList dims, int64_t rank, const char* op) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank, op);
    KILN_CHECK(seen.insert(w).second, "[", op, "] dim ", d, " appears more than once in ",
               shape_str(dims), ". Fix: name each dim once.");
    out.push_back(w);
  }
  return out;
}

}  // namespace

Tensor flip(const Tensor& x, IntList dims) {
  KILN_CHECK(x.defined(), "[flip] got an undefined tensor.");
  Tensor out = x;
  for (int64_t d : distinct_dims(dims, std::max<int64_t>(x.dim(), 1), "flip")) {
    if (x.dim() == 0 || x.size(d) <= 1) continue;
    const int64_t n = x.size(d);
    out = index_select(out, d, arange(n - 1, -1, -1, TensorOptions(kInt64).with_device(x.device())));
  }
  return out.is_same(x) ? x.clone() : out;
}

Tensor roll(const Tensor& x, IntList shifts, IntList dims) {
  KILN_CHECK(x.defined(), "[roll] got an undefined tensor.");
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, "[roll] without dims takes one shift (for the flattened tensor), "
               "got ", shape_str(shifts), ". Fix: pass one shift, or one dim per shift.");
    return reshape(roll(flatten(x), shifts, {0}), x.sizes());
  }
  KILN_CHECK(shifts.size() == dims.size(), "[roll] expected one shift per dim, got shifts ",
             shape_str(shifts), " and dims ", shape_str(dims), ". Fix: pass as many shifts as dims.");
  Tensor out = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    const int64_t n = x.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;  // the element at 0 moves to s
    if (s == 0) continue;
    out = cat({slice(out, d, n - s, n), slice(out, d, 0, n - s)}, d);
  }
  return out.is_same(x) ? x.clone() : out;
}

Tensor repeat(const Tensor& x, IntList repeats) {
  KILN_CHECK(x.defined(), "[repeat] got an undefined tensor.");
  const auto rank = static_cast<int64_t>(repeats.size());
  KILN_CHECK(rank >= x.dim(), "[repeat] expected at least as many repeats as x has dims (", x.dim(),
             "), got ", shape_str(repeats), ". Fix: pass one count per dim (tile() pads them).");
  for (int64_t r : repeats)
    KILN_CHECK(r >= 0, "[repeat] expected repeats >= 0, got ", shape_str(repeats), ".");
  // x as [1, ..., 1, s0, s1, ...] with a size-1 dim before each, expanded to [r0, s0', r1, s1', ...]
  // and merged pairwise: each copy of the whole tensor lands after the previous one.
  Shape padded(static_cast<size_t>(rank - x.dim()), 1);
  for (int64_t s : x.sizes()) padded.push_back(s);
  Shape interleaved, expanded, merged;
  for (int64_t d = 0; d < rank; ++d) {
    interleaved.push_back(1);
    interleaved.push_back(padded[static_cast<size_t>(d)]);
    expanded.push_back(repeats[static_cast<size_t>(d)]);
    expanded.push_back(padded[static_cast<size_t>(d)]);
    merged.push_back(repeats[static_cast<size_t>(d)] * padded[static_cast<size_t>(d)]);
  }
  return reshape(expand(reshape(x, interleaved), expanded).contiguous(), merged);
}

Tensor tile(const Tensor& x, IntList reps) {
  KILN_CHECK(x.defined(), "[tile] got an undefined tensor.");
  Shape padded(static_cast<size_t>(std::max<int64_t>(0, x.dim() - static_cast<int64_t>(reps.size()))), 1);
  for (int64_t r : reps) padded.push_back(r);
  return repeat(x, padded);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  KILN_CHECK(x.defined(), "[repeat_interleave] got an undefined tensor.");
  KILN_CHECK(repeats >= 0, "[repeat_interleave] expected repeats >= 0, got ", repeats, ".");
  if (!dim) return repeat_interleave(flatten(x), repeats, 0);
  const int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave");
  if (x.dim() == 0) return repeat_interleave(reshape(x, {1}), repeats, 0);
  // [..., n, ...] -> [..., n, 1, ...] expanded to [..., n, repeats, ...] and merged.
  Shape with_copies(x.sizes()), expanded(x.sizes()), merged(x.sizes());
  with_copies.insert(with_copies.begin() + d + 1, 1);
  expanded.insert(expanded.begin() + d + 1, repeats);
  merged[static_cast<size_t>(d)] *= repeats;
  return reshape(expand(reshape(x, with_copies), expanded).contiguous(), merged);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  KILN_CHECK(x.defined() && x.dim() >= 2, "[diagonal] expected a tensor of 2 or more dims, got ",
             x.defined() ? x.type_str() : std::string("an undefined tensor"), ".");
  const int64_t a = wrap_dim(dim1, x.dim(), "diagonal"), b = wrap_dim(dim2, x.dim(), "diagonal");
  KILN_CHECK(a != b, "[diagonal] dim1 and dim2 are both ", a, ". Fix: name two different dims.");
  const int64_t rows = x.size(a), cols = x.size(b);
  const int64_t length =
      std::max<int64_t>(0, offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols));
  // dim1 and dim2 moved last and merged: the diagonal is every (cols + 1)-th element from its
  // start, (0, offset) or (-offset, 0). A view when x's layout allows the merge.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != a && d != b) order.push_back(d);
  order.push_back(a);
  order.push_back(b);
  Tensor merged = flatten(permute(x, order), x.dim() - 2);
  if (length == 0) return slice(merged, -1, 0, 0);
  const int64_t start = offset >= 0 ? offset : -offset * cols;
  return slice(merged, -1, start, start + (length - 1) * (cols + 1) + 1, cols + 1);
}

Tensor diag_embed(const Tensor& x, int64_t offset) {
  KILN_CHECK(x.defined() && x.dim() >= 1, "[diag_embed] expected a tensor of 1 or more dims, got ",
             x.defined() ? x.type_str() : std::string("an undefined tensor"), ".");
  // x [..., n] times an identity [n, n] on its last dim, padded out to the offset.
  const int64_t n = x.size(-1), side = n + (offset >= 0 ? offset : -offset);
  Tensor square = mul(unsqueeze(x, -1), eye(n, TensorOptions(x.dtype()).with_device(x.device())));
  if (offset == 0) return square;
  Shape pad_rows(square.sizes()), pad_cols(square.sizes());
  const auto rank = static_cast<size_t>(square.dim());
  pad_rows[rank - 2] = side - n;  // rows added above (offset > 0) or below
  Tensor zero_rows = zeros(pad_rows, TensorOptions(x.dtype()).with_device(x.device()));
  Tensor tall = offset > 0 ? cat({square, zero_rows}, -2) : cat({zero_rows, square}, -2);
  pad_cols = Shape(tall.sizes());
  pad_cols[rank - 1] = side - n;
  Tensor zero_cols = zeros(pad_cols, TensorOptions(x.dtype()).with_device(x.device()));
  return offset > 0 ? cat({zero_cols, tall}, -1) : cat({tall, zero_cols}, -1);
}

Tensor diag(const Tensor& x, int64_t offset) {
  KILN_CHECK(x.defined() && (x.dim() == 1 || x.dim() == 2), "[diag] expected a 1-D or 2-D tensor, got ",
             x.defined() ? x.type_str() : std::string("an undefined tensor"),
             ". Fix: use diagonal() or diag_embed() for batches.");
  return x.dim() == 1 ? diag_embed(x, offset) : diagonal(x, offset).clone();
}

}  // namespace kiln
