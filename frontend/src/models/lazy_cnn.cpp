// LazyCNN.
#include "kiln/models/lazy_cnn.h"

#include "config_checks.h"
#include "kiln/nn/layers/activation.h"
#include "kiln/nn/layers/flatten.h"
#include "kiln/nn/layers/lazy_conv.h"
#include "kiln/nn/layers/pooling.h"

namespace kiln::models {

LazyCNN::LazyCNN(const LazyCNNConfig& cfg) : config(cfg) {
  detail::check_positive("LazyCNNConfig", "channels1", cfg.channels1);
  detail::check_positive("LazyCNNConfig", "channels2", cfg.channels2);
  detail::check_positive("LazyCNNConfig", "num_classes", cfg.num_classes);
  using namespace nn;
  features = register_module(
      "features",
      std::make_shared<Sequential>(
          std::make_shared<LazyConv2d>(cfg.channels1, 3, Conv2dOptions{.padding = 1}),
          std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
          std::make_shared<LazyConv2d>(cfg.channels2, 3, Conv2dOptions{.padding = 1}),
          std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>()));
  head = register_module("head", std::make_shared<LazyLinear>(cfg.num_classes));
}

Tensor LazyCNN::forward(const Tensor& x) {
  return head(features(x));
}

std::shared_ptr<LazyCNN> build(const LazyCNNConfig& config) {
  return std::make_shared<LazyCNN>(config);
}

}  // namespace kiln::models
