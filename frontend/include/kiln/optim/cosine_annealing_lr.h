// CosineAnnealingLR: anneals each group's lr from its base value to eta_min over T_max
// epochs along half a cosine, lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2
// (and back up again past T_max, as in PyTorch).
#pragma once

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace kiln::optim
