// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, as torch.optim.AdamW.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

// AdamOptions with PyTorch's AdamW default weight_decay = 1e-2.
struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // p *= 1 - lr * weight_decay before the Adam update
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

// As Adam (see adam.h) except that weight decay shrinks the parameter directly,
// p *= 1 - lr * weight_decay, instead of entering the gradient moments.
class AdamW : public OptimizerOf<AdamWOptions> {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup<AdamWOptions>> groups, AdamWOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override {
    return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  }
};

}  // namespace kiln::optim
