// dropout and its vjp, which reuses the keep mask the forward drew; the channel dropouts built on it.
#include "kiln/ops/dropout.h"

#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "nn_util.h"

namespace kiln {

namespace nn::functional {

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  KILN_CHECK(p >= 0 && p <= 1, "[dropout] expected a probability p in [0, 1], got ", p,
             ". Fix: p is the fraction of elements to drop (e.g. 0.1).");
  KILN_CHECK(x.defined(), "[dropout] the input is undefined.");
  if (!training || p == 0) return x;
  Generator& gen = generator ? *generator : default_generator();
  ops::DropoutAttrs a;
  a.p = p;
  a.generator.generator = generator;
  a.seed = gen.seed();
  a.offset = gen.reserve(ops::dropout_blocks(x.numel()));
  return kiln::detail::call(ops::dropout, Tensors{x}, a)[0];
}

}  // namespace nn::functional

namespace {

Tensors vjp_dropout(const VjpCall& c) {
  const double p = static_cast<const ops::DropoutAttrs&>(c.attrs).p;
  const Tensor &g = c.grad_outputs[0], &mask = c.outputs[1];
  return Tensors{where(mask, g * (p < 1 ? 1 / (1 - p) : 0.0), 0.0)};
}

// A compiled graph's dropout draws a new mask on every run, from the same stream position
// the eager call would take.
void reseed_dropout(Attrs& attrs, TensorSpan inputs) {
  auto& a = static_cast<ops::DropoutAttrs&>(attrs);
  Generator& gen = a.generator.get();
  a.seed = gen.seed();
  a.offset = gen.reserve(ops::dropout_blocks(inputs[0].numel()));
}

void return_dropout_draw(const Attrs& attrs, TensorSpan inputs) {
  const auto& a = static_cast<const ops::DropoutAttrs&>(attrs);
  Generator& gen = a.generator.get();
  uint64_t blocks = ops::dropout_blocks(inputs[0].numel());
  if (gen.seed() == a.seed && gen.offset() == a.offset + blocks) gen.set_offset(a.offset);
}

}  // namespace

namespace detail {
void register_dropout_vjps() {
  // The vjp reads the mask (output 1).
  set_vjp(ops::dropout, vjp_dropout, {.inputs = 0, .outputs = 0b10});
  ops::dropout.reseed = reseed_dropout;
  ops::dropout.return_draw = return_dropout_draw;
}
}  // namespace detail

}  // namespace kiln

namespace kiln::nn::functional {

namespace {

// Zeroes whole channels: one draw per (sample, channel), broadcast over `spatial` trailing dims.
Tensor channel_dropout(const Tensor& x, double p, bool training, Generator* generator, int64_t spatial,
                       const char* op) {
  KILN_CHECK(x.defined(), "[", op, "] the input is undefined.");
  KILN_CHECK(x.dim() == spatial + 1 || x.dim() == spatial + 2, "[", op, "] expected an input [N, C, ",
             spatial == 1 ? "L" : spatial == 2 ? "H, W" : "D, H, W", "] or without N, got ", x.type_str(),
             ". Fix: use dropout", spatial, "d on inputs of ", spatial + 2, " dims, or F::dropout elementwise.");
  KILN_CHECK(p >= 0 && p <= 1, "[", op, "] expected a probability p in [0, 1], got ", p, ".");
  if (!training || p == 0) return x;
  Shape mask_shape(x.sizes().begin(), x.sizes().end() - spatial);
  for (int64_t k = 0; k < spatial; ++k) mask_shape.push_back(1);
  const Tensor keep = dropout(ones(mask_shape, TensorOptions(x.dtype()).with_device(x.device())), p, true, generator);
  return x * keep;
}

}  // namespace

Tensor dropout1d(const Tensor& x, double p, bool training, Generator* generator) {
  return channel_dropout(x, p, training, generator, 1, "dropout1d");
}

Tensor dropout2d(const Tensor& x, double p, bool training, Generator* generator) {
  return channel_dropout(x, p, training, generator, 2, "dropout2d");
}

Tensor dropout3d(const Tensor& x, double p, bool training, Generator* generator) {
  return channel_dropout(x, p, training, generator, 3, "dropout3d");
}

}  // namespace kiln::nn::functional
