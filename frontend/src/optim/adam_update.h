// The Adam/AdamW per-parameter update, shared by both optimizers (internal header).
#pragma once

#include <string>
#include <utility>

#include "kiln/optim/optimizer.h"

namespace kiln::optim::detail {

struct AdamHyper {
  double lr;
  std::pair<double, double> betas;
  double eps;
  double weight_decay;
  bool amsgrad;
  bool maximize;
  bool decoupled;  // AdamW
};

void validate_adam(const std::string& optimizer, double lr, std::pair<double, double> betas,
                   double eps, double weight_decay);

// One step for `param` with gradient `grad`, updating its state; call under NoGradGuard.
void adam_update(Tensor param, Tensor grad, ParamState& state, const AdamHyper& h);

// The start of an Adam-family step (NAdam, RAdam): weight decay, decoupled (p *= 1 - lr * wd)
// or as an L2 term (returned in the gradient), then the moments m = beta1 m + (1 - beta1) g and
// v = beta2 v + (1 - beta2) g^2 in the state's "exp_avg" and "exp_avg_sq". Returns the
// gradient after decay.
Tensor decay_and_update_moments(Tensor& param, Tensor grad, ParamState& state, double lr,
                                double weight_decay, bool decoupled, std::pair<double, double> betas);

}  // namespace kiln::optim::detail
