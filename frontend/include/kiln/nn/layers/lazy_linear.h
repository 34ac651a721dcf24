// nn::LazyLinear: a Linear whose in_features is read from its first input (PyTorch's
// LazyLinear). Until then weight and bias are uninitialized parameters (kiln/nn/
// uninitialized.h): registered, listed by parameters(), usable to build an optimizer, but
// without a shape. The first forward (a dry run, or Module::build's shape-only pass)
// allocates them, draws them from kiln::default_generator() exactly as
// Linear::reset_parameters() does, and the layer becomes a plain Linear: type_name() and
// the printout switch from "LazyLinear(in_features=0, ...)" to "Linear(in_features=784, ...)".
//
//   auto head = register_module("head", std::make_shared<kiln::nn::LazyLinear>(10));
#pragma once

#include "kiln/nn/layers/linear.h"
#include "kiln/nn/uninitialized.h"

namespace kiln::nn {

class LazyLinear : public Linear, public LazyModule {
 public:
  explicit LazyLinear(int64_t out_features, bool bias = true);

  Tensor forward(const Tensor& input) override;
  // "LazyLinear" until the first forward, then "Linear".
  std::string type_name() const override;
  // False until the first forward has allocated weight and bias.
  bool initialized() const;

  // LazyModule: materialization from a state dict's shapes (Module::load_state_dict).
  std::string check_loaded(const std::string& name, IntList shape) const override;
  void materialize_for_load(IntList weight_shape) override;

 private:
  void materialize(const Tensor& input);
  // Allocates weight and bias (zeros) for input width / channel count `in`.
  void allocate(int64_t in);
};

}  // namespace kiln::nn
