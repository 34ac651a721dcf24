// nn::Dropout: zeroes elements with probability p while training (scaling the rest by
// 1 / (1 - p)), drawing from kiln::default_generator(); the identity after eval(). Dropout1d,
// Dropout2d and Dropout3d zero whole channels instead (kiln::nn::functional::dropout2d).
#pragma once

#include "kiln/nn/module.h"

namespace kiln::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  double p;
};

// The shared part of the channel dropouts.
class ChannelDropout : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  double p;

 protected:
  ChannelDropout(double p, int64_t spatial_dims);

 private:
  int64_t spatial_dims_;
};

class Dropout1d : public ChannelDropout {
 public:
  explicit Dropout1d(double p = 0.5) : ChannelDropout(p, 1) {}
};
class Dropout2d : public ChannelDropout {
 public:
  explicit Dropout2d(double p = 0.5) : ChannelDropout(p, 2) {}
};
class Dropout3d : public ChannelDropout {
 public:
  explicit Dropout3d(double p = 0.5) : ChannelDropout(p, 3) {}
};

}  // namespace kiln::nn
