// Uninitialized parameters: the weights of lazy layers (LazyLinear, LazyConv2d) before the
// first forward tells them their input width. Each is a registered parameter handle that
// exists from construction, so model.parameters() lists it and an optimizer can be built
// over it; but its shape is not known, so reading the shape or the data, or saving it,
// throws an error that names the layer, the parameter and the fix (a dry run, or
// Module::build). Materializing gives the same TensorImpl real data, so every handle
// (member fields, optimizers, parameter lists) sees the initialized tensor.
#pragma once

#include <string>

#include "kiln/dispatch.h"
#include "kiln/dtype.h"
#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln::nn {

// A parameter handle of `dtype` whose shape is not known yet. `layer` and `name` appear in
// its errors ("[LazyLinear] parameter 'weight' is uninitialized ..."), followed by `fix`.
Tensor uninitialized_parameter(std::string layer, std::string name, std::string fix,
                               DType dtype = default_dtype());

// True for a tensor made by uninitialized_parameter() that was not materialized yet.
bool is_uninitialized(const Tensor& t);

// True when a parameter of the tree is still uninitialized (a lazy layer that has not run).
bool has_uninitialized_parameters(const Module& module);

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
