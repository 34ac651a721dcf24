// NAdam (Dozat: Adam with Nesterov momentum and a momentum schedule) with L2 or decoupled
// weight decay: PyTorch's torch.optim.NAdam update, step for step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct NAdamOptions {
  double lr = 2e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum_decay = 4e-3;
  bool decoupled_weight_decay = false;  // AdamW's decay (NAdamW) instead of an L2 term
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("beta1", betas.first);
    v("beta2", betas.second);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("momentum_decay", momentum_decay);
    v("decoupled_weight_decay", decoupled_weight_decay);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter at step t, with g its gradient (negated when maximize):
//   decoupled: p *= 1 - lr * weight_decay;   else g += weight_decay * p
//   mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay));  P = P * mu_t  (the product so far)
//   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
//   d = sqrt(v / (1 - beta2^t)) + eps
//   p -= lr * (1 - mu_t) / (1 - P) * g / d + lr * mu_{t+1} / (1 - P * mu_{t+1}) * m / d
class NAdam : public OptimizerOf<NAdamOptions> {
 public:
  NAdam(std::vector<Tensor> params, NAdamOptions options = {});
  NAdam(std::vector<ParamGroup<NAdamOptions>> groups, NAdamOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::vector<std::string> scalar_names() const override { return {"mu_product"}; }
};

}  // namespace kiln::optim
