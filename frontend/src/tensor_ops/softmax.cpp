// softmax and log_softmax, and their vjps (written with kiln ops from the saved output).
#include "kiln/ops/softmax.h"

#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/reduction.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

namespace {
Tensor softmax_like(const OpDef& op, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  KILN_CHECK(x.defined(), "[", op.name, "] got an undefined tensor.");
  ops::SoftmaxAttrs a;
  a.dim = dim;
  return kiln::detail::call1(op, {dtype && *dtype != x.dtype() ? cast(x, *dtype) : x}, a);
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like(ops::softmax, x, dim, dtype);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like(ops::log_softmax, x, dim, dtype);
}

}  // namespace nn::functional

namespace {

int64_t dim_of(const VjpCall& c) {
  return wrap_dim(static_cast<const ops::SoftmaxAttrs&>(c.attrs).dim,
                  static_cast<int64_t>(c.input_types[0].shape.size()), c.op.name.c_str());
}

// y = softmax(x): dx = y * (g - sum(g * y)).
Tensors vjp_softmax(const VjpCall& c) {
  const Tensor &y = c.outputs[0], &g = c.grad_outputs[0];
  return Tensors{y * (g - sum(g * y, {dim_of(c)}, true))};
}

// y = log_softmax(x): dx = g - exp(y) * sum(g).
Tensors vjp_log_softmax(const VjpCall& c) {
  const Tensor &y = c.outputs[0], &g = c.grad_outputs[0];
  return Tensors{g - exp(y) * sum(g, {dim_of(c)}, true)};
}

}  // namespace

namespace detail {
void register_softmax_vjps() {
  set_vjp(ops::softmax, vjp_softmax, kSavesOutput);
  set_vjp(ops::log_softmax, vjp_log_softmax, kSavesOutput);
}
}  // namespace detail

}  // namespace kiln
