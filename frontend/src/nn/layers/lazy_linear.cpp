// nn::LazyLinear.
#include "kiln/nn/layers/lazy_linear.h"

#include "../layer_util.h"
#include "kiln/nn/uninitialized.h"

namespace kiln::nn {

namespace {
constexpr const char* kFix =
    "run one forward pass (a dry run) or call model.build({input shape}) on the model that "
    "holds it (e.g. model.build({{-1, 784}}) for [N, 784] inputs) first";
}

// Linear(0, 0, false) draws nothing from the generator (its tensors are empty), so building
// a lazy layer leaves the random stream where a dry run expects it.
LazyLinear::LazyLinear(int64_t out_features, bool bias) : Linear(0, 0, false) {
  KILN_CHECK(out_features >= 0, "[LazyLinear] expected a non-negative out_features, got ",
             out_features, ". Fix: pass the output width, e.g. LazyLinear(10).");
  this->out_features = out_features;
  weight = uninitialized_parameter("LazyLinear", "weight", kFix);
  *find_parameter("weight") = weight;
  if (bias) {
    this->bias = uninitialized_parameter("LazyLinear", "bias", kFix);
    *find_parameter("bias") = this->bias;
  }
}

bool LazyLinear::initialized() const {
  return !is_uninitialized(weight);
}

std::string LazyLinear::type_name() const {
  return initialized() ? "Linear" : "LazyLinear";
}

void LazyLinear::materialize(const Tensor& input) {
  KILN_CHECK(input.defined() && input.dim() >= 1,
             "[LazyLinear] expected an input with at least one dim (the last one gives "
             "in_features), got ",
             input.defined() ? input.type_str() : "an undefined tensor",
             ". Fix: pass [..., in_features] inputs.");
  // Runs eagerly even inside a shape-only pass or a trace: the values must exist.
  detail::EagerInitScope eager;
  allocate(input.size(-1));
  reset_parameters();
}

void LazyLinear::allocate(int64_t in) {
  Tensor w = Tensor::empty({out_features, in}, weight.dtype(), weight.device()).zero_();
  Tensor b = bias.defined() ? Tensor::empty({out_features}, bias.dtype(), bias.device()).zero_()
                            : Tensor();
  in_features = in;
  detail::materialize_parameter(weight, w);
  if (bias.defined()) detail::materialize_parameter(bias, b);
}

std::string LazyLinear::check_loaded(const std::string& name, IntList shape) const {
  if (name == "weight" && shape.size() == 2 && shape[0] == out_features) return {};
  if (name == "bias" && shape.size() == 1 && shape[0] == out_features) return {};
  return "[" + std::to_string(out_features) + (name == "weight" ? ", in_features]" : "]");
}

void LazyLinear::materialize_for_load(IntList weight_shape) {
  if (initialized()) return;
  detail::EagerInitScope eager;
  allocate(weight_shape[1]);
}

Tensor LazyLinear::forward(const Tensor& input) {
  detail::check_floating_input(input, kFloat32, "LazyLinear");
  if (!initialized()) {
    materialize(input);
  } else {
    KILN_CHECK(input.dim() >= 1 && input.size(-1) == in_features,
               "[Linear] expected an input whose last dim is in_features = ", in_features,
               " (taken from the first input of this LazyLinear), got ", input.type_str(),
               ". Fix: pass [..., ", in_features,
               "] inputs; a lazy layer's width is fixed by its first forward.");
  }
  return Linear::forward(input);
}

}  // namespace kiln::nn
