// StepLR: multiplies each group's lr by gamma every step_size epochs
// (lr = base_lr * gamma^floor(epoch / step_size) when nothing else changes the lr).
#pragma once

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

}  // namespace kiln::optim
