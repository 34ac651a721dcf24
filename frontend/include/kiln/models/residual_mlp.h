// ResidualMLP: a stem Linear, `num_blocks` residual blocks x + down(relu(up(x))), and a
// Linear head. MLPConfig{784, 256, 4, 10} has exactly 729,866 parameters; {d_hidden = 512,
// num_blocks = 8} has 4,609,546. State paths: stem.weight, blocks.0.up.weight, head.bias.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/models/config.h"
#include "kiln/nn/layers/flatten.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/module.h"
#include "kiln/nn/module_list.h"

namespace kiln::models {

struct MLPConfig {
  int64_t d_in = 784;
  int64_t d_hidden = 256;
  int64_t num_blocks = 4;
  int64_t d_out = 10;
  template <class V>
  void fields(V& v) {
    v("d_in", d_in);
    v("d_hidden", d_hidden);
    v("num_blocks", num_blocks);
    v("d_out", d_out);
  }
};

// x + down(relu(up(x))): both Linears keep the width, so blocks stack.
class ResidualBlock : public nn::Module {
 public:
  explicit ResidualBlock(int64_t width);
  Tensor forward(const Tensor& x) override;

  nn::ModulePtr<nn::Linear> up;
  nn::ModulePtr<nn::Linear> down;
};

class ResidualMLP : public nn::Module {
 public:
  explicit ResidualMLP(const MLPConfig& config);
  // Accepts [N, d_in] or anything that flattens to it ([N, 1, 28, 28]).
  Tensor forward(const Tensor& x) override;

  MLPConfig config;
  nn::ModulePtr<nn::Flatten> flatten;
  nn::ModulePtr<nn::Linear> stem;
  nn::ModulePtr<nn::ModuleList> blocks;
  nn::ModulePtr<nn::Linear> head;
};

std::shared_ptr<ResidualMLP> build(const MLPConfig& config);

}  // namespace kiln::models
