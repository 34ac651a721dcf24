// RAdam (Liu et al.: Adam with its adaptive step rectified while the second moment's
// variance is untrustworthy) with L2 or decoupled weight decay: PyTorch's torch.optim.RAdam
// update, step for step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct RAdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("beta1", betas.first);
    v("beta2", betas.second);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("decoupled_weight_decay", decoupled_weight_decay);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter at step t, with g its gradient (negated when maximize):
//   decoupled: p *= 1 - lr * weight_decay;   else g += weight_decay * p
//   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
//   rho_inf = 2 / (1 - beta2) - 1;   rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
//   rho_t > 5: r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
//              p -= lr * m / (1 - beta1^t) * r * sqrt(1 - beta2^t) / (sqrt(v) + eps)
//   else:      p -= lr * m / (1 - beta1^t)          (plain momentum while v is unreliable)
class RAdam : public OptimizerOf<RAdamOptions> {
 public:
  RAdam(std::vector<Tensor> params, RAdamOptions options = {});
  RAdam(std::vector<ParamGroup<RAdamOptions>> groups, RAdamOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
};

}  // namespace kiln::optim
