// Uninitialized parameters: the weights of lazy layers (LazyLinear, LazyConv2d) before the
// first forward tells them their input width. Each is a registered parameter handle that
// exists from construction, so model.parameters() lists it and an optimizer can be built
// over it; but its shape is not known, so reading the shape or the data, or saving it,
// throws an error that names the layer, the parameter and the fix (a dry run, or
// Module::build). Materializing gives the same TensorImpl real data, so every handle
// (member fields, optimizers, parameter lists) sees the initialized tensor.
#pragma once

#include <string>

#include "kiln/dtype.h"
#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln {
// Dispatch's interceptor seam (kiln/dispatch.h) is internal: this header only holds a pointer.
class DispatchInterceptor;
}  // namespace kiln

namespace kiln::nn {

// A parameter handle of `dtype` whose shape is not known yet. `layer` and `name` appear in
// its errors ("[LazyLinear] parameter 'weight' is uninitialized ..."), followed by `fix`.
Tensor uninitialized_parameter(std::string layer, std::string name, std::string fix,
                               DType dtype = default_dtype());

// True for a tensor made by uninitialized_parameter() that was not materialized yet.
bool is_uninitialized(const Tensor& t);

// True when a parameter of the tree is still uninitialized (a lazy layer that has not run).
bool has_uninitialized_parameters(const Module& module);

// Implemented by lazy layers so that Module::load_state_dict can materialize them from a
// state dict's shapes, as PyTorch does: loading a checkpoint into a freshly built lazy model
// needs no dry run first.
class LazyModule {
 public:
  virtual ~LazyModule() = default;
  // "" when a state dict entry of `shape` fits parameter `name` ("weight" or "bias") of this
  // uninitialized layer; otherwise what was expected ("[10, in_features]").
  virtual std::string check_loaded(const std::string& name, IntList shape) const = 0;
  // Allocates the parameters (zeros, no random draws: the load overwrites them) for a
  // weight of `weight_shape`, which check_loaded accepted. A no-op once materialized.
  virtual void materialize_for_load(IntList weight_shape) = 0;
};

namespace detail {

// Gives the uninitialized parameter `param` the data of `value` (same dtype) in place and
// clears the uninitialized marker.
void materialize_parameter(const Tensor& param, const Tensor& value);

// Suspends the thread's dispatch interceptor (a trace or a shape-only pass) and gradient
// recording for its lifetime, so a lazy layer's initialization really runs inside either.
class EagerInitScope {
 public:
  EagerInitScope();
  ~EagerInitScope();
  EagerInitScope(const EagerInitScope&) = delete;
  EagerInitScope& operator=(const EagerInitScope&) = delete;

 private:
  DispatchInterceptor* interceptor_;
  bool grad_mode_;
};

}  // namespace detail
}  // namespace kiln::nn
