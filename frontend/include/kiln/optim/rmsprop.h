// RMSprop (Hinton) with momentum, the centered variant and L2 weight decay: PyTorch's
// torch.optim.RMSprop update, step for step.
#pragma once

#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  // smoothing constant of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;  // normalize by the estimated variance instead of the raw moment
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("alpha", alpha);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("momentum", momentum);
    v("centered", centered);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter, with g its gradient (negated when maximize):
//   g += weight_decay * p
//   s = alpha * s + (1 - alpha) * g^2
//   centered: a = alpha * a + (1 - alpha) * g;  d = sqrt(s - a^2) + eps;  else d = sqrt(s) + eps
//   momentum > 0: b = momentum * b + g / d;  p -= lr * b;   else p -= lr * g / d
class RMSprop : public OptimizerOf<RMSpropOptions> {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  RMSprop(std::vector<ParamGroup<RMSpropOptions>> groups, RMSpropOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override {
    return {"square_avg", "grad_avg", "momentum_buffer"};
  }
};

}  // namespace kiln::optim
