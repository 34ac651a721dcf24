// The padding layers, with PyTorch's names: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad
// and CircularPad, each in 1d, 2d and 3d. `padding` is one amount for every side, or
// (left, right) for 1d, (left, right, top, bottom) for 2d, and (left, right, top, bottom, front,
// back) for 3d, as in PyTorch; they call kiln::nn::functional::pad.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// The shared part: the padding spread to 2 * dims amounts, the mode and the fill.
class PadLayer : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // (1, 1, 2, 2), and value=... for ConstantPad

  std::vector<int64_t> padding;
  std::string mode;
  double value = 0;

 protected:
  PadLayer(std::vector<int64_t> padding, int64_t dims, std::string mode, double value = 0);

 private:
  int64_t dims_;
};

#define KILN_PAD_LAYER(Name, dims, mode)                                                               \
  class Name : public PadLayer {                                                                       \
   public:                                                                                             \
    explicit Name(std::vector<int64_t> padding) : PadLayer(std::move(padding), dims, mode) {}          \
    explicit Name(int64_t padding) : PadLayer({padding}, dims, mode) {}                                \
  };
KILN_PAD_LAYER(ZeroPad1d, 1, "constant")
KILN_PAD_LAYER(ZeroPad2d, 2, "constant")
KILN_PAD_LAYER(ZeroPad3d, 3, "constant")
KILN_PAD_LAYER(ReflectionPad1d, 1, "reflect")
KILN_PAD_LAYER(ReflectionPad2d, 2, "reflect")
KILN_PAD_LAYER(ReflectionPad3d, 3, "reflect")
KILN_PAD_LAYER(ReplicationPad1d, 1, "replicate")
KILN_PAD_LAYER(ReplicationPad2d, 2, "replicate")
KILN_PAD_LAYER(ReplicationPad3d, 3, "replicate")
KILN_PAD_LAYER(CircularPad1d, 1, "circular")
KILN_PAD_LAYER(CircularPad2d, 2, "circular")
KILN_PAD_LAYER(CircularPad3d, 3, "circular")
#undef KILN_PAD_LAYER

#define KILN_CONSTANT_PAD_LAYER(Name, dims)                                                                  \
  class Name : public PadLayer {                                                                             \
   public:                                                                                                   \
    Name(std::vector<int64_t> padding, double value) : PadLayer(std::move(padding), dims, "constant", value) {} \
    Name(int64_t padding, double value) : PadLayer({padding}, dims, "constant", value) {}                    \
  };
KILN_CONSTANT_PAD_LAYER(ConstantPad1d, 1)
KILN_CONSTANT_PAD_LAYER(ConstantPad2d, 2)
KILN_CONSTANT_PAD_LAYER(ConstantPad3d, 3)
#undef KILN_CONSTANT_PAD_LAYER

}  // namespace kiln::nn
