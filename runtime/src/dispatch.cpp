// dispatch(): infer -> (tracer | kernel -> autograd). Kept lean: this is the eager hot path.
#include "kiln/dispatch.h"

#include "kiln/ops/infer_util.h"

namespace kiln {

namespace {
thread_local DispatchInterceptor* tls_interceptor = nullptr;
thread_local bool tls_grad_mode = true;
AutogradHook g_autograd_hook = nullptr;
ConcretizationHook g_concretization_hook = nullptr;

// Out of line, so the eager path's input check stays small.
[[gnu::cold, gnu::noinline]] void refuse_symbolic_input(const OpDef& op, size_t i, const Tensor& t) {
  // An uninitialized parameter or a shape-only result explains itself.
  t.impl()->symbolic->check_data_read(("the " + op.name + " kernel").c_str(), SourceLoc());
  KILN_FAIL("[", op.name, "] input ", i, " is a symbolic tensor from a trace that has ended. "
            "Fix: do not keep tensors created inside a traced forward (e.g. in a member "
            "variable) and use them afterwards.");
}

// Inputs on more than one device: fine when the odd ones out are host scalars joining an
// elementwise op (infer::is_host_scalar), else an error naming the first two devices.
[[gnu::cold, gnu::noinline]] void check_mixed_devices(const OpDef& op, TensorSpan inputs) {
  const bool host_scalars_join = op.lowering == LoweringClass::Elementwise;
  const Tensor* first = nullptr;
  size_t first_index = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || (host_scalars_join && infer::is_host_scalar(t))) continue;
    if (!first) {
      first = &t;
      first_index = i;
    } else if (!(t.device() == first->device())) {
      KILN_FAIL("[", op.name, "] expected all inputs on one device, found ", first->device(),
                " (input ", first_index, ") and ", t.device(), " (input ", i,
                "). Fix: move them to one device first, e.g. x.to(", first->device(),
                "), or the module with model.to(device).");
    }
  }
}

void check_inputs(const OpDef& op, TensorSpan inputs) {
  const Tensor* first = nullptr;
  bool mixed = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) continue;
    if (t.is_symbolic()) [[unlikely]] refuse_symbolic_input(op, i, t);
    if (!first) first = &t;
    mixed = mixed || !(t.device() == first->device());
  }
  if (mixed) [[unlikely]] check_mixed_devices(op, inputs);
}

[[noreturn, gnu::cold]] void refuse_device(const OpDef& op, Device device) {
  std::string supported;
  Device fallback = kCPU;
  for (int type = kNumDeviceTypes; type-- > 0;) {
    if (!op.kernels[static_cast<size_t>(type)]) continue;
    fallback = Device(static_cast<DeviceType>(type));
    supported = fallback.str() + (supported.empty() ? "" : ", ") + supported;
  }
  KILN_FAIL("[", op.name, "] has no kernel for ", device, " yet (it has kernels for: ",
            supported.empty() ? "no device" : supported, "). Fix: move its inputs with .to(",
            fallback, ") for this op, and the result back with .to(", device, ").");
}

Device output_device(const TensorTypes& types, TensorSpan inputs) {
  if (!types.empty()) return types[0].device;
  for (const Tensor& t : inputs)
    if (t.defined()) return t.device();
  return kCPU;
}
}  // namespace

TensorTypes infer_types(const OpDef& op, TensorSpan inputs, const Attrs& attrs) {
  TensorTypes types;
  InferCall call{op, inputs, attrs, types};
  op.infer(call);
  return types;
}

Tensors dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs) {
  TensorTypes types = infer_types(op, inputs, attrs);
  if (tls_interceptor) return tls_interceptor->intercept(op, inputs, attrs, std::move(types));
  check_inputs(op, inputs);

  Device device = output_device(types, inputs);
  KernelFn kernel = op.kernels[static_cast<size_t>(device.type)];
  if (!kernel) [[unlikely]] refuse_device(op, device);

  Tensors outputs;
  if (op.kernel_makes_outputs) {
    outputs.resize(types.size());
  } else {
    for (const TensorType& t : types) outputs.push_back(Tensor::empty(t.shape, t.dtype, t.device));
  }
  KernelCall call{op, inputs, attrs, std::span<Tensor>(outputs.data(), outputs.size()), types};
  kernel(call);

  if (g_autograd_hook && tls_grad_mode && op.differentiable) {
    for (const Tensor& t : inputs) {
      if (t.defined() && t.requires_grad()) {
        g_autograd_hook(op, inputs, attrs, std::span<Tensor>(outputs.data(), outputs.size()));
        break;
      }
    }
  }
  return outputs;
}

namespace {

// The result `types` must fit `self` exactly: in-place ops cannot grow or convert their target.
[[gnu::always_inline]] inline void check_into(const OpDef& op, const TensorTypes& types,
                                              const Tensor& self) {
  KILN_CHECK(types.size() == 1 && !op.kernel_makes_outputs, "[", op.name, "] has no in-place form.");
  KILN_CHECK(types[0].shape == Shape(self.sizes()), "[", op.name, "_] the result has shape ",
             shape_str(types[0].shape), " but the tensor written in place has shape ",
             shape_str(self.sizes()), ". Fix: in-place ops cannot grow their target; use the "
             "out-of-place form.");
  KILN_CHECK(types[0].dtype == self.dtype(), "[", op.name, "_] the result is ", types[0].dtype,
             " but the tensor written in place is ", self.dtype(), ". Fix: use the out-of-place form.");
  KILN_CHECK(types[0].device == self.device(), "[", op.name, "_] the result is on ",
             types[0].device, " but the tensor written in place is on ", self.device(),
             ". Fix: move the other inputs to ", self.device(), " first.");
}

// Under an interceptor or into a symbolic tensor. A shape-only pass writes nothing (its
// tensors have no data), so the checks are all there is to do; anything else is refused.
[[gnu::noinline]] void dispatch_into_symbolic(const OpDef& op, const TensorTypes& types,
                                              const Tensor& self) {
  if (self.is_symbolic()) self.impl()->symbolic->check_shape_read("sizes()");
  bool noop = tls_interceptor && self.is_symbolic() && self.impl()->symbolic->inplace_write_is_noop();
  KILN_CHECK(noop, "[", op.name, "_] in-place ops cannot run ",
             tls_interceptor ? "under a trace or a shape-only pass (Module::build, nn::summary) "
                               "when they write a tensor that existed before it (a parameter "
                               "or buffer)"
                             : "on a symbolic tensor outside the trace that made it",
             ". Fix: use the out-of-place form (x = x + y instead of x.add_(y)), or skip "
             "the update in that pass.");
  check_into(op, types, self);
}

}  // namespace

void dispatch_into(const OpDef& op, TensorSpan inputs, const Attrs& attrs, const Tensor& self) {
  TensorTypes types = infer_types(op, inputs, attrs);
  if (tls_interceptor || self.is_symbolic()) [[unlikely]] {
    if (tls_interceptor) {
      if (self.is_symbolic()) self.impl()->symbolic->check_shape_read("sizes()");
      check_into(op, types, self);
      if (tls_interceptor->intercept_into(op, inputs, attrs, self)) return;
    }
    dispatch_into_symbolic(op, types, self);
    return;
  }
  check_inputs(op, inputs);
  check_into(op, types, self);
  KernelFn kernel = op.kernels[static_cast<size_t>(self.device().type)];
  if (!kernel) [[unlikely]] refuse_device(op, self.device());
  Tensor out = self;
  KernelCall call{op, inputs, attrs, std::span<Tensor>(&out, 1), types};
  kernel(call);
  self.bump_version();
}

DispatchInterceptor* current_interceptor() { return tls_interceptor; }

DispatchInterceptor* set_interceptor(DispatchInterceptor* interceptor) {
  DispatchInterceptor* prev = tls_interceptor;
  tls_interceptor = interceptor;
  return prev;
}

void set_autograd_hook(AutogradHook hook) { g_autograd_hook = hook; }

bool grad_mode_enabled() { return tls_grad_mode; }
void set_grad_mode(bool enabled) { tls_grad_mode = enabled; }

void set_concretization_hook(ConcretizationHook hook) { g_concretization_hook = hook; }

void concretize(const Tensor& t, const char* what, SourceLoc loc) {
  if (t.is_symbolic()) t.impl()->symbolic->check_data_read(what, loc);
  if (g_concretization_hook) g_concretization_hook(t, what, loc);
  KILN_CHECK(!t.is_symbolic(), "Tensor::", what, " read the data of a symbolic tensor at ",
             loc.file_name(), ":", loc.line(), ", but symbolic tensors have no data.");
}

}  // namespace kiln
