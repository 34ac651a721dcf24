// The op methods of Tensor (declared in the runtime's tensor.h), including in-place ops.
//
// In-place ops and autograd: without gradient tracking the kernel writes straight into
// the tensor. With tracking, the result is computed out of place from a clone of the old
// value, copied in, and the tensor's history is rebased onto the result's node; the
// version bump makes any node that saved the old value refuse to run.
#include "call.h"
#include "kiln/autograd.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/view.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln {

// ---- autograd ----

void Tensor::retain_grad() const {
  KILN_CHECK(requires_grad(), "retain_grad: the tensor does not require grad, so it will never have one.");
  if (is_leaf()) return;  // leaves keep .grad anyway
  auto& meta = *impl_->autograd;
  auto& slots = meta.grad_fn->retained;
  if (slots.size() <= meta.output_nr) slots.resize(meta.output_nr + 1);
  slots[meta.output_nr] = impl_;
  meta.retains_grad = true;
}

Tensor Tensor::detach() const {
  // Under a trace, an op: the compiled graph must cut the gradient here too.
  if (impl_->symbolic && current_interceptor()) {
    detail::ensure_initialized();
    Tensor self = *this;
    return dispatch1(ops::detach, TensorSpan(&self, 1));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = impl_->sizes;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->device = impl_->device;
  impl->symbolic = impl_->symbolic;
  return Tensor(std::move(impl));
}

// ---- conversions and copies ----

Tensor Tensor::to(DType dtype) const { return dtype == this->dtype() ? *this : cast(*this, dtype); }

// Tensor::to(Device) is in tensor_ops/to_device.cpp, with its vjp.

Tensor Tensor::contiguous() const { return kiln::contiguous(*this); }
Tensor Tensor::clone() const { return kiln::clone(*this); }

// ---- views ----

Tensor Tensor::reshape(IntList sizes) const { return kiln::reshape(*this, sizes); }
Tensor Tensor::view(IntList sizes) const { return kiln::view(*this, sizes); }
Tensor Tensor::permute(IntList dims) const { return kiln::permute(*this, dims); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return kiln::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "Tensor::t: expects a tensor with <= 2 dims, got ", type_str(),
             ". Fix: use transpose(dim0, dim1) or mT-style transpose(-1, -2).");
  return dim() < 2 ? *this : kiln::transpose(*this, 0, 1);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return kiln::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const { return kiln::narrow(*this, dim, start, length); }
Tensor Tensor::select(int64_t dim, int64_t index) const { return kiln::select(*this, dim, index); }
Tensor Tensor::expand(IntList sizes) const { return kiln::expand(*this, sizes); }
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return kiln::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return kiln::unsqueeze(*this, dim); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return kiln::flatten(*this, s, e); }
Tensor Tensor::as_strided(IntList sizes, IntList strides, int64_t offset) const {
  return kiln::as_strided(*this, sizes, strides, offset);
}

// ---- math ----

Tensor Tensor::sum(IntList dims, bool keepdim) const { return kiln::sum(*this, dims, keepdim); }
Tensor Tensor::mean(IntList dims, bool keepdim) const { return kiln::mean(*this, dims, keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return kiln::matmul(*this, other); }
Tensor Tensor::pow(Scalar exponent) const { return kiln::pow(*this, exponent); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }

// ---- in-place ----

namespace {

int category(DType t) { return t == DType::Bool ? 0 : (is_integral(t) ? 1 : 2); }

void check_inplace_dtype(const Tensor& self, DType result, const char* op) {
  KILN_CHECK(category(result) <= category(self.dtype()), "[", op, "_] the result is ", result,
             " but it would be written into a ", self.dtype(), " tensor, losing information. Fix: use the "
             "out-of-place form (x = x ", op, " y) or convert the tensor first.");
}

bool tracks_grad(const Tensor& self, std::initializer_list<const Tensor*> others) {
  if (!grad_mode_enabled()) return false;
  if (self.requires_grad()) return true;
  for (const Tensor* t : others)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

// Copies `value` into self's memory and makes self's gradient history value's.
void rebase_history(const Tensor& self, const Tensor& value, const char* op) {
  KILN_CHECK(!(self.is_leaf() && self.requires_grad()), "[", op, "_] a leaf tensor that requires grad (",
             self.type_str(), ") cannot be modified in place: its gradient would be lost. Fix: modify it "
             "under kiln::NoGradGuard (as optimizers do), or use the out-of-place form.");
  KILN_CHECK(!self.impl()->is_view, "[", op, "_] in-place ops on a view of a tensor that tracks gradients "
             "are not supported. Fix: use the out-of-place form, or clone() the view first.");
  {
    NoGradGuard no_grad;
    dispatch_into(ops::clone, TensorSpan(&value, 1), no_attrs(), self);
  }
  auto& meta = self.impl()->autograd_meta();
  if (value.impl()->autograd && value.impl()->autograd->grad_fn) {
    meta.grad_fn = value.impl()->autograd->grad_fn;
    meta.output_nr = value.impl()->autograd->output_nr;
  } else {
    meta.grad_fn = nullptr;
  }
}

// self = op(self, other) in place.
Tensor& binary_inplace(Tensor& self, const OpDef& op, const Tensor& other, Tensor (*fn)(const Tensor&, const Tensor&)) {
  KILN_CHECK(self.defined() && other.defined(), "[", op.name, "_] got an undefined tensor.");
  check_inplace_dtype(self, result_type(self, other), op.name.c_str());
  if (!tracks_grad(self, {&other})) {
    Tensor o = other.dtype() == self.dtype() ? other : cast(other, self.dtype());
    Tensor inputs[2] = {self, o};
    detail::ensure_initialized();
    dispatch_into(op, TensorSpan(inputs, 2), no_attrs(), self);
    return self;
  }
  Tensor value = fn(clone(self), other);
  rebase_history(self, value.dtype() == self.dtype() ? value : cast(value, self.dtype()), op.name.c_str());
  return self;
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, Scalar alpha) {
  return binary_inplace(*this, ops::add, alpha.to_double() == 1 ? other : other * alpha, kiln::add);
}
Tensor& Tensor::add_(Scalar other) { return add_(scalar_like(other, *this)); }
Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) {
  return binary_inplace(*this, ops::sub, alpha.to_double() == 1 ? other : other * alpha, kiln::sub);
}
Tensor& Tensor::mul_(const Tensor& other) { return binary_inplace(*this, ops::mul, other, kiln::mul); }
Tensor& Tensor::mul_(Scalar other) { return mul_(scalar_like(other, *this)); }
Tensor& Tensor::div_(const Tensor& other) {
  KILN_CHECK(is_floating(dtype()), "[div_] true division of a ", dtype(), " tensor gives floats that cannot "
             "be stored in it. Fix: use x = x / y, or convert x to float first.");
  return binary_inplace(*this, ops::div, other, kiln::div);
}
Tensor& Tensor::div_(Scalar other) { return div_(scalar_like(other, *this)); }

Tensor& Tensor::copy_(const Tensor& src) {
  KILN_CHECK(defined() && src.defined(), "[copy_] got an undefined tensor.");
  // Between the cpu and a device the cast runs on the cpu's side, where every cast has a
  // kernel.
  auto cast_to_dtype = [&](const Tensor& t) { return t.dtype() == dtype() ? t : cast(t, dtype()); };
  Tensor value = src.device().is_cpu() ? cast_to_dtype(src).to(device())
                                       : cast_to_dtype(src.to(device()));
  Shape target(sizes());
  if (Shape(value.sizes()) != target) value = kiln::expand(value, target);
  if (!tracks_grad(*this, {&src})) {
    detail::ensure_initialized();
    dispatch_into(ops::clone, TensorSpan(&value, 1), no_attrs(), *this);
    return *this;
  }
  rebase_history(*this, kiln::clone(value), "copy");
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  if (!device().is_cpu() && !tracks_grad(*this, {})) {
    // full's kernel writes the value into this tensor (or view) on its device; the value
    // travels as a kernel parameter, not as a tensor copied there first.
    ops::FullAttrs a;
    a.shape = Shape(sizes());
    a.value = value.to_double();
    a.dtype = dtype();
    a.device = device();
    detail::ensure_initialized();
    dispatch_into(ops::full, {}, a, *this);
    return *this;
  }
  Tensor v = scalar_like(value, *this);
  if (v.dtype() != dtype()) v = cast(v, dtype());
  if (!tracks_grad(*this, {})) {
    Tensor e = kiln::expand(v, sizes());
    dispatch_into(ops::clone, TensorSpan(&e, 1), no_attrs(), *this);
    return *this;
  }
  rebase_history(*this, full_like(*this, value), "fill");
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  if (!tracks_grad(*this, {})) {
    ops::ClampAttrs a;
    if (min) a.min = min->to_double();
    if (max) a.max = max->to_double();
    detail::ensure_initialized();
    Tensor self = *this;
    dispatch_into(ops::clamp, TensorSpan(&self, 1), a, *this);
    return *this;
  }
  rebase_history(*this, kiln::clamp(kiln::clone(*this), min, max), "clamp");
  return *this;
}


}  // namespace kiln
