// Matrix products (PyTorch's matmul rules on top of the rank >= 2 primitive) and the vjp.
#include "kiln/tensor_ops/linalg.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/linalg.h"
#include "kiln/tensor_ops/elementwise.h"
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
