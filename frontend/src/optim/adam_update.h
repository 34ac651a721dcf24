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

}  // namespace kiln::optim::detail
