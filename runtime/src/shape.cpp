// Shape arithmetic shared by every op's infer.
#include "kiln/shape.h"

#include <sstream>

#include "kiln/error.h"

namespace kiln {

int64_t numel(IntList shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(IntList shape) {
  Shape strides(shape.size(), 1);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(IntList shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

Shape broadcast_shapes(IntList a, IntList b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ",
               shape_str(b), " cannot be broadcast: dim ", static_cast<int64_t>(i) - static_cast<int64_t>(n),
               " is ", da, " in the first and ", db,
               " in the second (each dim must match or be 1). Fix: reshape or unsqueeze one "
               "operand so the trailing dims line up.");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = std::max<int64_t>(rank, 1);
  KILN_CHECK(dim >= -r && dim < r, "[", op, "] dim ", dim, " is out of range for a tensor of rank ",
             rank, " (expected ", -r, " <= dim < ", r, ").");
  return dim < 0 ? dim + r : dim;
}

uint64_t reduction_mask(IntList dims, int64_t rank, const char* op) {
  KILN_CHECK(rank <= 64, "[", op, "] tensors of rank ", rank, " are not supported (max 64).");
  if (dims.empty()) return rank == 0 ? 0 : (rank == 64 ? ~0ull : ((1ull << rank) - 1));
  uint64_t mask = 0;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank, op);
    if (rank == 0) continue;
    KILN_CHECK(!(mask & (1ull << w)), "[", op, "] dim ", d, " appears twice in dims ",
               shape_str(dims), ". Fix: list each dim once.");
    mask |= 1ull << w;
  }
  return mask;
}

}  // namespace kiln
