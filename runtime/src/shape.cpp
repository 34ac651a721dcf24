// Shape arithmetic shared by every op's infer.
#include "kiln/shape.h"

#include <sstream>

#include "kiln/error.h"

namespace kiln {

namespace {

[[noreturn]] void fail_overflow(std::string_view what, int64_t a, const char* op, int64_t b) {
  KILN_FAIL(what, ": ", a, " ", op, " ", b,
            " does not fit a 64-bit size (the largest is 9223372036854775807). Fix: check where "
            "these sizes come from (a config, a file, an attribute, an input shape).");
}

[[noreturn]] void fail_shape_overflow(IntList shape, const char* what) {
  KILN_FAIL("the shape ", shape_str(shape), " has more ", what,
            " than a 64-bit size can count (the largest is 9223372036854775807). Fix: check "
            "where these sizes come from (a config, a file, an attribute, an input shape).");
}

}  // namespace

int64_t size_mul(int64_t a, int64_t b, std::string_view what) {
  std::optional<int64_t> r = checked_mul(a, b);
  if (!r) fail_overflow(what, a, "*", b);
  return *r;
}

int64_t size_add(int64_t a, int64_t b, std::string_view what) {
  std::optional<int64_t> r = checked_add(a, b);
  if (!r) fail_overflow(what, a, "+", b);
  return *r;
}

int64_t numel(IntList shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) [[unlikely]]
      fail_shape_overflow(shape, "elements");
  return n;
}

Shape contiguous_strides(IntList shape) {
  Shape strides(shape.size(), 1);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    if (__builtin_mul_overflow(acc, std::max<int64_t>(shape[i], 1), &acc)) [[unlikely]]
      fail_shape_overflow(shape, "elements per stride");
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
