// ExponentialLR: multiplies each group's lr by gamma every epoch (lr = base_lr * gamma^epoch
// when nothing else changes the lr), as torch.optim.lr_scheduler.ExponentialLR.
#pragma once

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() const override;

 private:
  double gamma_;
};

}  // namespace kiln::optim
