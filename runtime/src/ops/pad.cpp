// Definitions of pad and pad_backward.
#include "kiln/ops/pad.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

int64_t pad_source_index(int64_t o, int64_t n, int64_t left, const std::string& mode) {
  const int64_t i = o - left;
  if (i >= 0 && i < n) return i;
  if (mode == "reflect") {  // mirror without repeating the edge element
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    const int64_t m = ((i % period) + period) % period;
    return m < n ? m : period - m;
  }
  if (mode == "replicate") return i < 0 ? 0 : n - 1;
  if (mode == "circular") return ((i % n) + n) % n;
  return -1;  // constant: the fill value
}

namespace {

// Checks the pad list against x and returns the padded shape.
Shape padded_shape(const InferCall& c, IntList x, const PadAttrs& a, bool backward) {
  const char* op = c.op.name.c_str();
  KILN_CHECK(
      a.mode == "constant" || a.mode == "reflect" || a.mode == "replicate" || a.mode == "circular",
      "[", op, "] expected mode \"constant\", \"reflect\", \"replicate\" or \"circular\", got \"",
      a.mode, "\".");
  KILN_CHECK(!backward || a.mode != "constant", "[", op,
             "] is for the non-constant modes; constant padding's "
             "gradient is a negative pad.");
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t dims = static_cast<int64_t>(a.pad.size()) / 2;
  KILN_CHECK(a.pad.size() % 2 == 0 && dims <= rank, "[", op,
             "] expected an even-length pad list of at most 2 * rank = ", 2 * rank,
             " entries ((left, right) of the last dim first), got ", shape_str(a.pad), " for ",
             shape_str(x),
             ". Fix: give a (left, right) pair for each padded dim, e.g. {1, 1} for the last dim.");
  Shape out(x);
  for (int64_t k = 0; k < dims; ++k) {
    int64_t d = rank - 1 - k, left = a.pad[2 * k], right = a.pad[2 * k + 1];
    int64_t n = x[d];
    if (a.mode != "constant") {
      KILN_CHECK(left >= 0 && right >= 0, "[", op, "] ", a.mode,
                 " padding needs non-negative amounts, got ", shape_str(a.pad),
                 ". Fix: crop with slice() or use mode \"constant\".");
      KILN_CHECK(n > 0 || (left == 0 && right == 0), "[", op, "] cannot ", a.mode, "-pad dim ", d,
                 " of size 0 in ", shape_str(x), ".");
    }
    if (a.mode == "reflect")
      KILN_CHECK(left < n && right < n, "[", op,
                 "] reflect padding must be smaller than the padded dim: got pad (", left, ", ",
                 right, ") for dim ", d, " of size ", n, " in ", shape_str(x),
                 ". Fix: use smaller padding or mode \"replicate\".");
    if (a.mode == "circular")
      KILN_CHECK(left <= n && right <= n, "[", op,
                 "] circular padding can wrap at most once: got pad (", left, ", ", right,
                 ") for dim ", d, " of size ", n, " in ", shape_str(x), ".");
    out[d] = n + left + right;
    KILN_CHECK(out[d] >= 0, "[", op, "] pad ", shape_str(a.pad), " gives dim ", d, " of ",
               shape_str(x), " a negative size ", out[d], ". Fix: crop by at most the dim's size.");
  }
  return out;
}

void infer_pad(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  c.outputs.push_back({x.dtype(),
                       padded_shape(c, x.sizes(), static_cast<const PadAttrs&>(c.attrs), false),
                       x.device()});
}

void infer_pad_backward(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_floating(c, 0);
  const auto& a = static_cast<const PadAttrs&>(c.attrs);
  const Tensor& g = c.inputs[0];
  const int64_t rank = g.dim(), dims = static_cast<int64_t>(a.pad.size()) / 2;
  KILN_CHECK(a.pad.size() % 2 == 0 && dims <= rank, "[pad_backward] pad list ", shape_str(a.pad),
             " does not fit a gradient ", g.type_str(), ".");
  Shape in(g.sizes());
  for (int64_t k = 0; k < dims; ++k) in[rank - 1 - k] -= a.pad[2 * k] + a.pad[2 * k + 1];
  for (int64_t s : in)
    KILN_CHECK(s >= 0, "[pad_backward] pad ", shape_str(a.pad), " is larger than the gradient ",
               g.type_str(), ".");
  Shape check = padded_shape(c, in, a, true);
  KILN_CHECK(check == Shape(g.sizes()), "[pad_backward] inconsistent shapes.");
  c.outputs.push_back({g.dtype(), in, g.device()});
}

}  // namespace

OpDef pad("pad", {"x"}, infer_pad, LoweringClass::Layout, attrs_of<PadAttrs>());
OpDef pad_backward("pad_backward", {"grad"}, infer_pad_backward, LoweringClass::Layout,
                   attrs_of<PadAttrs>());

}  // namespace kiln::ops
