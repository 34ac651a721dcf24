// Factory functions.
#include "kiln/tensor_ops/factory.h"

#include <cmath>

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/factory.h"

namespace kiln {

namespace {
Tensor with_grad(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) t.set_requires_grad(true);
  return t;
}
}  // namespace

Tensor empty(IntList sizes, TensorOptions o) { return with_grad(Tensor::empty(sizes, o.dtype, o.device), o); }

Tensor full(IntList sizes, Scalar value, TensorOptions o) {
  ops::FullAttrs a;
  a.shape = Shape(sizes);
  a.value = value.to_double();
  a.dtype = o.dtype;
  a.device = o.device;
  return with_grad(detail::call1(ops::full, {}, a), o);
}

Tensor zeros(IntList sizes, TensorOptions o) { return full(sizes, 0, o); }
Tensor ones(IntList sizes, TensorOptions o) { return full(sizes, 1, o); }

Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor full_like(const Tensor& t, Scalar value) {
  return full(t.sizes(), value, TensorOptions(t.dtype()).with_device(t.device()));
}
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.sizes(), t.dtype(), t.device()); }

namespace {
template <class T>
Tensor from_list(std::initializer_list<T> values, DType natural, const TensorOptions& o, bool dtype_given) {
  std::vector<double> v(values.begin(), values.end());
  Tensor t = Tensor::from_vector(v).to(dtype_given ? o.dtype : natural);
  return with_grad(t, o);
}
}  // namespace

Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return from_list(values, o.dtype, o, true);
}
Tensor tensor(std::initializer_list<int64_t> values, TensorOptions o) {
  return from_list(values, kInt64, o, o.dtype != default_dtype());
}
Tensor tensor(std::initializer_list<int> values, TensorOptions o) {
  return from_list(values, kInt64, o, o.dtype != default_dtype());
}

Tensor arange(Scalar end) { return arange(0, end, 1); }

Tensor arange(Scalar start, Scalar end, Scalar step) {
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  return arange(start, end, step, TensorOptions(integral ? kInt64 : default_dtype()));
}

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions o) {
  ops::ArangeAttrs a;
  a.start = start.to_double();
  a.end = end.to_double();
  a.step = step.to_double();
  a.dtype = o.dtype;
  a.device = o.device;
  return with_grad(detail::call1(ops::arange, {}, a), o);
}

namespace detail {
void register_factory_vjps() {}
}  // namespace detail

}  // namespace kiln
