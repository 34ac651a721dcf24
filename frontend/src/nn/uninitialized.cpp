// Uninitialized parameters of lazy layers: a symbolic TensorImpl whose SymbolicInfo refuses
// every shape and data read with the layer's remedy, until materialize_parameter() gives
// the same TensorImpl real data.
#include "kiln/nn/uninitialized.h"

#include "kiln/dispatch.h"
#include "kiln/nn/state_budget.h"

#include <utility>

namespace kiln::nn {

namespace {

class UninitializedInfo final : public SymbolicInfo {
 public:
  UninitializedInfo(std::string layer, std::string name, std::string fix)
      : layer_(std::move(layer)), name_(std::move(name)), fix_(std::move(fix)) {}

  void check_shape_read(const char* what) const override {
    KILN_FAIL("[", layer_, "] parameter '", name_, "' is uninitialized: a lazy layer learns its ",
              "shape from its first input, so ", what, " cannot be answered yet. Fix: ", fix_, ".");
  }
  void check_data_read(const char* what, SourceLoc) const override {
    KILN_FAIL("[", layer_, "] parameter '", name_, "' is uninitialized: a lazy layer allocates ",
              "it at its first forward, so ", what, " has no data to read yet. Fix: ", fix_, ".");
  }
  std::string describe() const override {
    return "uninitialized parameter '" + name_ + "' of " + layer_;
  }

 private:
  std::string layer_, name_, fix_;
};

}  // namespace

Tensor uninitialized_parameter(std::string layer, std::string name, std::string fix, DType dtype) {
  KILN_CHECK(is_floating(dtype), "[", layer, "] parameter '", name,
             "' must be floating point, got ", dtype, ". Fix: pass a floating-point dtype.");
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->device = kCPU;
  impl->symbolic =
      std::make_shared<UninitializedInfo>(std::move(layer), std::move(name), std::move(fix));
  Tensor t(std::move(impl));
  t.set_requires_grad(true);
  return t;
}

bool is_uninitialized(const Tensor& t) {
  return t.defined() && t.is_symbolic() &&
         dynamic_cast<const UninitializedInfo*>(t.impl()->symbolic.get()) != nullptr;
}

bool has_uninitialized_parameters(const Module& module) {
  for (const Tensor& p : module.parameters())
    if (is_uninitialized(p)) return true;
  return false;
}

namespace detail {

void materialize_parameter(const Tensor& param, const Tensor& value) {
  KILN_CHECK(is_uninitialized(param), "[materialize_parameter] expected an uninitialized ",
             "parameter, got ", param.defined() ? param.type_str() : "an undefined tensor",
             ". Fix: materialize each lazy parameter once.");
  KILN_CHECK(value.defined() && !value.is_symbolic() && value.dtype() == param.dtype(),
             "[materialize_parameter] expected a concrete ", param.dtype(), " tensor, got ",
             value.defined() ? value.type_str() : "an undefined tensor", ".");
  KILN_CHECK(value.numel() <= max_state_elements(), "[materialize_parameter] the lazy parameter ",
             "would become ", value.type_str(), ", ", value.numel(),
             " elements, more than the limit of ", max_state_elements(),
             " per tensor. Fix: check the input that sized it; if the model really needs it, "
             "raise the limit with kiln::nn::set_max_state_elements or KILN_MAX_STATE_ELEMENTS.");
  count_state_elements("the lazy parameter " + value.type_str(), value.numel());
  replace_tensor_data(param, value);
  param.impl()->symbolic.reset();
}

EagerInitScope::EagerInitScope()
    : interceptor_(set_interceptor(nullptr)), grad_mode_(grad_mode_enabled()) {
  set_grad_mode(false);
}

EagerInitScope::~EagerInitScope() {
  set_grad_mode(grad_mode_);
  set_interceptor(interceptor_);
}

}  // namespace detail
}  // namespace kiln::nn
