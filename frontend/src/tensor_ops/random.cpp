// Random factories and linspace/eye: thin wrappers that fill the ops' attributes.
#include "kiln/tensor_ops/random.h"

#include "../call.h"
#include "kiln/ops/factory.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

namespace {

Tensor with_grad(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor random_float(const OpDef& op, IntList sizes, const TensorOptions& o, Generator* generator) {
  ops::RandomAttrs a;
  a.shape = Shape(sizes);
  a.dtype = o.dtype;
  a.device = o.device;
  a.generator.generator = generator;
  return with_grad(detail::call1(op, {}, a), o);
}

}  // namespace

Tensor rand(IntList sizes, TensorOptions o, Generator* generator) {
  return random_float(ops::rand, sizes, o, generator);
}
Tensor randn(IntList sizes, TensorOptions o, Generator* generator) {
  return random_float(ops::randn, sizes, o, generator);
}

Tensor rand_like(const Tensor& t, Generator* generator) {
  return rand(t.sizes(), TensorOptions(t.dtype()).with_device(t.device()), generator);
}
Tensor randn_like(const Tensor& t, Generator* generator) {
  return randn(t.sizes(), TensorOptions(t.dtype()).with_device(t.device()), generator);
}

Tensor randint(int64_t low, int64_t high, IntList sizes, TensorOptions o, Generator* generator) {
  ops::RandintAttrs a;
  a.low = low;
  a.high = high;
  a.shape = Shape(sizes);
  a.dtype = o.dtype;
  a.device = o.device;
  a.generator.generator = generator;
  return with_grad(detail::call1(ops::randint, {}, a), o);
}

Tensor randint(int64_t high, IntList sizes, TensorOptions o, Generator* generator) {
  return randint(0, high, sizes, o, generator);
}

Tensor bernoulli(const Tensor& p, Generator* generator) {
  KILN_CHECK(p.defined(), "[bernoulli] got an undefined tensor.");
  ops::BernoulliAttrs a;
  a.generator.generator = generator;
  return detail::call1(ops::bernoulli, {is_floating(p.dtype()) ? p : cast(p, default_dtype())}, a);
}

Tensor bernoulli(const Tensor& x, double p, Generator* generator) {
  KILN_CHECK(x.defined(), "[bernoulli] got an undefined tensor.");
  DType d = x.dtype() == DType::Float64 ? kFloat64 : kFloat32;
  // A broadcast 0-d p: the kernel reads it without materializing a tensor of x's size.
  Tensor probs = expand(Tensor::scalar(p, d, x.device()), x.sizes());
  Tensor out = bernoulli(probs, generator);
  return out.dtype() == x.dtype() ? out : cast(out, x.dtype());
}

Tensor linspace(Scalar start, Scalar end, int64_t steps, TensorOptions o) {
  ops::LinspaceAttrs a;
  a.start = start.to_double();
  a.end = end.to_double();
  a.steps = steps;
  a.dtype = o.dtype;
  a.device = o.device;
  return with_grad(detail::call1(ops::linspace, {}, a), o);
}

Tensor eye(int64_t n, TensorOptions o) {
  return eye(n, n, o);
}

Tensor eye(int64_t n, int64_t m, TensorOptions o) {
  ops::EyeAttrs a;
  a.n = n;
  a.m = m;
  a.dtype = o.dtype;
  a.device = o.device;
  return with_grad(detail::call1(ops::eye, {}, a), o);
}

}  // namespace kiln
