// nn::LazyConv2d: a Conv2d whose in_channels is read from its first input (PyTorch's
// LazyConv2d; input [N, C, H, W] or [C, H, W]). Until then weight and bias are
// uninitialized parameters (kiln/nn/uninitialized.h). The first forward (a dry run, or
// Module::build's shape-only pass) allocates them, draws them from kiln::default_generator()
// exactly as Conv2d::reset_parameters() does, and the layer becomes a plain Conv2d
// (type_name() and printout included).
//
//   kiln::nn::LazyConv2d conv(16, 3, {.padding = 1});
#pragma once

#include "kiln/nn/layers/conv.h"
#include "kiln/nn/uninitialized.h"

namespace kiln::nn {

class LazyConv2d : public Conv2d, public LazyModule {
 public:
  LazyConv2d(int64_t out_channels, IntArg kernel_size, Conv2dOptions options = {});

  Tensor forward(const Tensor& input) override;
  // "LazyConv2d" until the first forward, then "Conv2d".
  std::string type_name() const override;
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
