// Adam (Kingma & Ba) with optional L2 weight decay and AMSGrad: PyTorch's
// torch.optim.Adam update, step for step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2 penalty added to the gradient (AdamW decouples it)
  bool amsgrad = false;
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("beta1", betas.first);
    v("beta2", betas.second);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("amsgrad", amsgrad);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter at step t, with g its gradient (negated when maximize):
//   g += weight_decay * p
//   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
//   v_max = max(v_max, v) (amsgrad; used in place of v below)
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam : public OptimizerOf<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup<AdamOptions>> groups, AdamOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override {
    return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }
};

}  // namespace kiln::optim
