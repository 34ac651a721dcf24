// BatchNormCNN: two conv + BatchNorm + ReLU + 2x2 max-pool stages and a two-layer head with
// dropout, for 28x28 single-channel images (the Fashion-MNIST paper's "2 conv + pooling +
// BN" family). State paths: features.0.weight (conv), features.1.running_mean (BN), ...,
// classifier.1.weight.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/models/config.h"
#include "kiln/nn/module.h"
#include "kiln/nn/sequential.h"

namespace kiln::models {

struct BatchNormCNNConfig {
  int64_t in_channels = 1;
  int64_t image_size = 28;  // square inputs; must be divisible by 4 (two 2x2 pools)
  int64_t channels1 = 32;
  int64_t channels2 = 64;
  int64_t d_hidden = 128;
  int64_t num_classes = 10;
  double dropout = 0.25;
  template <class V>
  void fields(V& v) {
    v("in_channels", in_channels);
    v("image_size", image_size);
    v("channels1", channels1);
    v("channels2", channels2);
    v("d_hidden", d_hidden);
    v("num_classes", num_classes);
    v("dropout", dropout);
  }
};

class BatchNormCNN : public nn::Module {
 public:
  explicit BatchNormCNN(const BatchNormCNNConfig& config);
  // [N, in_channels, image_size, image_size] -> logits [N, num_classes].
  Tensor forward(const Tensor& x) override;

  BatchNormCNNConfig config;
  nn::ModulePtr<nn::Sequential> features;
  nn::ModulePtr<nn::Sequential> classifier;
};

std::shared_ptr<BatchNormCNN> build(const BatchNormCNNConfig& config);

}  // namespace kiln::models
