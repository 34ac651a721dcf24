// scaled_dot_product_attention on CUDA tensors (kiln/cuda/attention_kernels.h): composed of
// the other CUDA kernels, the score matrix materialized.
#include "kiln/cuda/attention_kernels.h"

#include <limits>

#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor.h"
#include "tensor_views.h"

namespace kiln::cuda {

namespace {

Tensor call(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = no_attrs()) {
  return dispatch1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

// A number as a host scalar of `dtype`: elementwise kernels take it as a parameter.
Tensor number(double value, DType dtype) { return Tensor::scalar(value, dtype); }

// The entries a causal mask removes, key j > query i, as a bool [L, S] on `device`.
Tensor future_keys(int64_t L, int64_t S, Device device) {
  ops::ArangeAttrs keys, queries;
  keys.end = static_cast<double>(S), queries.end = static_cast<double>(L);
  keys.device = queries.device = device;
  const Tensor j = call(ops::arange, {}, keys), i = call(ops::arange, {}, queries);
  return call(ops::gt, {reshaped(j, {1, S}), reshaped(i, {L, 1})});
}

ops::ReduceAttrs over_keys(int64_t rank) {
  ops::ReduceAttrs a;
  a.dims = {rank - 1};
  a.keepdim = true;
  return a;
}

void attention_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::AttentionAttrs&>(c.attrs);
  const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
  const Tensor mask = c.inputs.size() > 3 ? c.inputs[3] : Tensor();
  const Tensor &out = c.outputs[0], &logsumexp = c.outputs[1];
  const DType dtype = q.dtype();
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  if (out.numel() == 0) return;
  // Scores [B..., L, S] = (q * scale) kᵀ, then the masks: -inf where a key may not be attended.
  Tensor scores = call(ops::matmul, {call(ops::mul, {q, number(a.scale, dtype)}), last_two_swapped(k)});
  const int64_t rank = scores.dim(), L = scores.size(rank - 2), S = scores.size(rank - 1);
  if (a.is_causal) scores = call(ops::where, {future_keys(L, S, q.device()), number(minus_infinity, dtype), scores});
  if (mask.defined()) {
    scores = mask.dtype() == kBool ? call(ops::where, {mask, scores, number(minus_infinity, dtype)})
                                   : call(ops::add, {scores, mask});
  }
  // A "safe" softmax: a query that may attend to no key (its maximum -inf) gets zero weights
  // and a logsumexp of -inf.
  const Tensor most = call(ops::amax, {scores}, over_keys(rank));
  const Tensor shift = call(ops::where, {call(ops::eq, {most, number(minus_infinity, dtype)}), number(0, dtype), most});
  const Tensor e = call(ops::exp, {call(ops::sub, {scores, shift})});
  const Tensor total = call(ops::sum, {e}, over_keys(rank));
  const Tensor weights =
      call(ops::div, {e, call(ops::where, {call(ops::eq, {total, number(0, dtype)}), number(1, dtype), total})});
  const Tensor lse = call(ops::add, {shift, call(ops::log, {total})});
  const Tensor product[] = {weights, v};
  dispatch_into(ops::matmul, product, no_attrs(), out);
  copy_on_gpu(reshaped(lse, logsumexp.sizes()), logsumexp);
}

}  // namespace

void register_attention_kernels() {
  ops::scaled_dot_product_attention.kernels[static_cast<size_t>(DeviceType::CUDA)] = attention_kernel;
}

}  // namespace kiln::cuda
