// Matrix products (PyTorch's matmul rules on top of the rank >= 2 primitive) and the vjp.
#include "kiln/tensor_ops/linalg.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/linalg.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/rearrange.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {
Tensor mm(const Tensor& a, const Tensor& b) {
  DType d = result_type(a, b);
  return detail::call1(ops::matmul, {a.dtype() == d ? a : cast(a, d), b.dtype() == d ? b : cast(b, d)});
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.defined() && b.defined(), "[matmul] got an undefined tensor.");
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both operands need at least one dim, got ", a.type_str(),
             " and ", b.type_str(), ". Fix: use mul() for scalars.");
  if (a.dim() == 1 && b.dim() == 1) {
    KILN_CHECK(a.size(0) == b.size(0), "[matmul] dot product of vectors of different lengths: ", a.type_str(),
               " and ", b.type_str(), ".");
    return reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  }
  if (a.dim() == 1) return squeeze(mm(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(mm(a, unsqueeze(b, 1)), -1);
  // [..., M, K] @ [K, N] with a large batch: fold the batch into M for one big GEMM.
  if (b.dim() == 2 && a.dim() > 2 && a.is_contiguous()) {
    Shape out(a.sizes());
    out.back() = b.size(1);
    return reshape(mm(reshape(a, {-1, a.size(-1)}), b), out);
  }
  return mm(a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(weight.dim() == 2, "[linear] expected a 2-D weight [out_features, in_features], got ",
             weight.type_str(), ".");
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "[linear] the input's last dim is ",
             x.dim() >= 1 ? x.size(-1) : 0, " (", x.type_str(), ") but the weight expects ", weight.size(1),
             " features (", weight.type_str(), "). Fix: give the layer in_features=", x.dim() >= 1 ? x.size(-1) : 0,
             " or reshape the input.");
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? y + bias : y;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, "[bmm] expected two 3-D tensors, got ", a.type_str(), " and ",
             b.type_str(), ".");
  KILN_CHECK(a.size(0) == b.size(0), "[bmm] batch sizes differ: ", a.size(0), " vs ", b.size(0), ".");
  return mm(a, b);
}

Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, "[addmm] expected 2-D matrices, got ", a.type_str(), " and ",
             b.type_str(), ".");
  Tensor p = mm(a, b);
  if (alpha.to_double() != 1) p = p * alpha;
  // beta == 0 ignores input's values (nan included), as in PyTorch, but keeps its broadcast.
  if (beta.to_double() == 0) return contiguous(expand(p, broadcast_shapes(input.sizes(), p.sizes(), "addmm")));
  return (beta.to_double() == 1 ? input : input * beta) + p;
}

Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  Tensor p = bmm(a, b);
  if (alpha.to_double() != 1) p = p * alpha;
  if (beta.to_double() == 0) return contiguous(expand(p, broadcast_shapes(input.sizes(), p.sizes(), "baddbmm")));
  return (beta.to_double() == 1 ? input : input * beta) + p;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.defined() && b.defined() && a.dim() == 1 && b.dim() == 1, "[outer] expected two 1-D "
             "tensors, got ", a.defined() ? a.type_str() : "undefined", " and ",
             b.defined() ? b.type_str() : "undefined", ". Fix: flatten them first.");
  return unsqueeze(a, 1) * unsqueeze(b, 0);
}

Tensor kron(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.defined() && b.defined(), "[kron] got an undefined tensor.");
  const int64_t rank = std::max(a.dim(), b.dim());
  Shape as(static_cast<size_t>(rank - a.dim()), 1), bs(static_cast<size_t>(rank - b.dim()), 1);
  for (int64_t s : a.sizes()) as.push_back(s);
  for (int64_t s : b.sizes()) bs.push_back(s);
  // a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...], merged pairwise.
  Shape a_spread, b_spread, merged;
  for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
    a_spread.push_back(as[d]);
    a_spread.push_back(1);
    b_spread.push_back(1);
    b_spread.push_back(bs[d]);
    merged.push_back(as[d] * bs[d]);
  }
  return reshape(reshape(a, a_spread) * reshape(b, b_spread), merged);
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
  KILN_CHECK(a.defined() && b.defined(), "[cross] got an undefined tensor.");
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "cross");
  int64_t d = -1;
  if (dim) {
    d = wrap_dim(*dim, static_cast<int64_t>(shape.size()), "cross");
  } else {
    for (size_t i = 0; i < shape.size() && d < 0; ++i)
      if (shape[i] == 3) d = static_cast<int64_t>(i);
  }
  KILN_CHECK(d >= 0 && shape[static_cast<size_t>(d)] == 3, "[cross] expected a dim of size 3, got shape ",
             shape_str(shape), dim ? " at dim " + std::to_string(*dim) : std::string(),
             ". Fix: pass the dim that holds the 3-vectors.");
  const Tensor x = broadcast_to(a, shape), y = broadcast_to(b, shape);
  auto at = [&](const Tensor& t, int64_t i) { return narrow(t, d, i, 1); };
  return cat({at(x, 1) * at(y, 2) - at(x, 2) * at(y, 1), at(x, 2) * at(y, 0) - at(x, 0) * at(y, 2),
              at(x, 0) * at(y, 1) - at(x, 1) * at(y, 0)},
             d);
}

Tensor trace(const Tensor& x) {
  KILN_CHECK(x.defined() && x.dim() == 2, "[trace] expected a 2-D tensor, got ",
             x.defined() ? x.type_str() : std::string("an undefined tensor"), ".");
  return sum(diagonal(x));
}

namespace {

Tensor transpose_last(const Tensor& t) { return transpose(t, -1, -2); }

Tensors vjp_matmul(const VjpCall& c) {
  const Tensor &g = c.grad_outputs[0], &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs(0)) ga = sum_to(mm(g, transpose_last(b)), c.input_types[0].shape);
  if (c.needs(1)) gb = sum_to(mm(transpose_last(a), g), c.input_types[1].shape);
  return Tensors{ga, gb};
}

}  // namespace

namespace detail {

void register_linalg_vjps() { set_vjp(ops::matmul, vjp_matmul); }

}  // namespace detail
}  // namespace kiln
