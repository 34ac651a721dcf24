// Adamax (Kingma & Ba, Adam under the infinity norm) with L2 weight decay: PyTorch's
// torch.optim.Adamax update, step for step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdamaxOptions {
  double lr = 2e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("beta1", betas.first);
    v("beta2", betas.second);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter at step t, with g its gradient (negated when maximize):
//   g += weight_decay * p
//   m = beta1 * m + (1 - beta1) * g;   u = max(beta2 * u, |g| + eps)
//   p -= lr / (1 - beta1^t) * m / u
class Adamax : public OptimizerOf<AdamaxOptions> {
 public:
  Adamax(std::vector<Tensor> params, AdamaxOptions options = {});
  Adamax(std::vector<ParamGroup<AdamaxOptions>> groups, AdamaxOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_inf"}; }
};

}  // namespace kiln::optim
