// kiln::nn::functional: shared helpers and the registration of every nn vjp. The functions
// live in one file per concept: softmax, attention, loss, norm, conv, pool, dropout,
// embedding, pad.
#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/tensor_ops/reduction.h"
#include "nn_util.h"

namespace kiln {
namespace detail {

Shape nn_pair(IntList v, const char* name, const char* fn, IntList fallback) {
  if (v.empty()) v = fallback;
  KILN_CHECK(v.size() == 1 || v.size() == 2, "[", fn, "] expected ", name,
             " as one value or two (height, width), got ", shape_str(v), ".");
  return v.size() == 1 ? Shape{v[0], v[0]} : Shape{v[0], v[1]};
}

void nn_check_reduction(const std::string& reduction, const char* fn) {
  KILN_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", "[", fn,
             "] expected reduction \"mean\", \"sum\" or \"none\", got \"", reduction, "\".");
}

Tensor nn_reduce(const Tensor& loss, const std::string& reduction, const char* fn) {
  nn_check_reduction(reduction, fn);
  if (reduction == "mean") return loss.mean();
  if (reduction == "sum") return loss.sum();
  return loss;
}

void register_nn_vjps() {
  register_softmax_vjps();
  register_attention_vjps();
  register_loss_vjps();
  register_norm_vjps();
  register_conv_vjps();
  register_pool_vjps();
  register_dropout_vjps();
  register_embedding_vjps();
  register_pad_vjps();
}

}  // namespace detail
}  // namespace kiln
