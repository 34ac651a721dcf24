// BatchNormCNN.
#include "kiln/models/batch_norm_cnn.h"

#include "config_checks.h"
#include "kiln/nn/layers/activation.h"
#include "kiln/nn/layers/batch_norm.h"
#include "kiln/nn/layers/conv.h"
#include "kiln/nn/layers/dropout.h"
#include "kiln/nn/layers/flatten.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/layers/pooling.h"

namespace kiln::models {

BatchNormCNN::BatchNormCNN(const BatchNormCNNConfig& cfg) : config(cfg) {
  const char* name = "BatchNormCNNConfig";
  detail::check_positive(name, "in_channels", cfg.in_channels);
  detail::check_positive(name, "image_size", cfg.image_size);
  KILN_CHECK(cfg.image_size % 4 == 0, "[", name,
             "] expected image_size divisible by 4 (two 2x2 "
             "pools), found ",
             cfg.image_size, ". Fix: pad or resize the images, e.g. to 28.");
  detail::check_positive(name, "channels1", cfg.channels1);
  detail::check_positive(name, "channels2", cfg.channels2);
  detail::check_positive(name, "d_hidden", cfg.d_hidden);
  detail::check_positive(name, "num_classes", cfg.num_classes);
  detail::check_probability(name, "dropout", cfg.dropout);
  using namespace nn;
  // Convolutions feeding a BatchNorm need no bias: the norm's shift replaces it.
  features = register_module(
      "features", std::make_shared<Sequential>(
                      std::make_shared<Conv2d>(cfg.in_channels, cfg.channels1, 3,
                                               Conv2dOptions{.padding = 1, .bias = false}),
                      std::make_shared<BatchNorm2d>(cfg.channels1), std::make_shared<ReLU>(),
                      std::make_shared<MaxPool2d>(2),
                      std::make_shared<Conv2d>(cfg.channels1, cfg.channels2, 3,
                                               Conv2dOptions{.padding = 1, .bias = false}),
                      std::make_shared<BatchNorm2d>(cfg.channels2), std::make_shared<ReLU>(),
                      std::make_shared<MaxPool2d>(2)));
  const int64_t side = cfg.image_size / 4;
  classifier = register_module(
      "classifier", std::make_shared<Sequential>(
                        std::make_shared<Flatten>(),
                        std::make_shared<Linear>(cfg.channels2 * side * side, cfg.d_hidden),
                        std::make_shared<ReLU>(), std::make_shared<Dropout>(cfg.dropout),
                        std::make_shared<Linear>(cfg.d_hidden, cfg.num_classes)));
}

Tensor BatchNormCNN::forward(const Tensor& x) {
  return classifier(features(x));
}

std::shared_ptr<BatchNormCNN> build(const BatchNormCNNConfig& config) {
  return std::make_shared<BatchNormCNN>(config);
}

}  // namespace kiln::models
