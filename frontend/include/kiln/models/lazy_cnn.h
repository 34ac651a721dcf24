// LazyCNN: two LazyConv2d + ReLU + 2x2 max-pool stages and a LazyLinear head. No layer is
// told its input width: the first forward (or Module::build) reads it. With the default
// config the flattened width for 28x28 inputs is 16 * 7 * 7 = 784.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/models/config.h"
#include "kiln/nn/layers/lazy_linear.h"
#include "kiln/nn/module.h"
#include "kiln/nn/sequential.h"

namespace kiln::models {

struct LazyCNNConfig {
  int64_t channels1 = 8;
  int64_t channels2 = 16;
  int64_t num_classes = 10;
  template <class V>
  void fields(V& v) {
    v("channels1", channels1);
    v("channels2", channels2);
    v("num_classes", num_classes);
  }
};

class LazyCNN : public nn::Module {
 public:
  explicit LazyCNN(const LazyCNNConfig& config);
  // [N, C, H, W] with any C, H, W (H and W at least 4) -> logits [N, num_classes].
  Tensor forward(const Tensor& x) override;

  LazyCNNConfig config;
  nn::ModulePtr<nn::Sequential> features;  // ends with Flatten
  nn::ModulePtr<nn::LazyLinear> head;
};

std::shared_ptr<LazyCNN> build(const LazyCNNConfig& config);

}  // namespace kiln::models
