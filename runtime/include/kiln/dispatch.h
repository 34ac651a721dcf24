// dispatch(): the one function every op goes through. It runs the op's infer, then either
// hands the call to the active interceptor (the tracer) or runs the device kernel and
// lets the autograd hook record a node.
#pragma once

#include <utility>

#include "kiln/op.h"

namespace kiln {

Tensors dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs = no_attrs());
// Single-output convenience (inline: no frame of its own between an op function and dispatch).
inline Tensor dispatch1(const OpDef& op, TensorSpan inputs, const Attrs& attrs = no_attrs()) {
  return std::move(dispatch(op, inputs, attrs)[0]);
}
// Runs the op writing into `self` (which must have the result's shape and dtype);
// bumps self's version. Autograd for in-place ops is the frontend's business.
void dispatch_into(const OpDef& op, TensorSpan inputs, const Attrs& attrs, const Tensor& self);

// Runs infer only (used by the tracer and tests).
TensorTypes infer_types(const OpDef& op, TensorSpan inputs, const Attrs& attrs = no_attrs());

// ---- seams for the layers above ----

// A tracer installs one per thread; dispatch hands it every call after infer.
class DispatchInterceptor {
 public:
  virtual ~DispatchInterceptor() = default;
  virtual Tensors intercept(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                            TensorTypes&& output_types) = 0;
  // An in-place write (add_, copy_, fill_: BatchNorm's running statistics), into a
  // concrete or a symbolic tensor; the result's type was checked against `self`. Return
  // true when handled (observed then run, or recorded by a tracer); false, the default,
  // leaves it to the shape-only rule (a no-op on the interceptor's own symbolic tensors,
  // refused otherwise).
  virtual bool intercept_into(const OpDef& /*op*/, TensorSpan /*inputs*/, const Attrs& /*attrs*/,
                              const Tensor& /*self*/) {
    return false;
  }
};
DispatchInterceptor* current_interceptor();
// Returns the previous interceptor so installs can nest.
DispatchInterceptor* set_interceptor(DispatchInterceptor* interceptor);

// The frontend's autograd records a node through this hook (called only when grad mode
// is on and some input requires grad).
using AutogradHook = void (*)(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                              std::span<Tensor> outputs);
void set_autograd_hook(AutogradHook hook);

// Grad mode is per thread; NoGradGuard (frontend) flips it.
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// Reading a symbolic tensor's data: the tracer decides (graph break or error).
using ConcretizationHook = void (*)(const Tensor& t, const char* what, SourceLoc loc);
void set_concretization_hook(ConcretizationHook hook);
void concretize(const Tensor& t, const char* what, SourceLoc loc);


}  // namespace kiln
