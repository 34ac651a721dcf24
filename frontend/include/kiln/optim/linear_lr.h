// LinearLR: a linear warm-up (or cool-down) of each group's lr from start_factor * base_lr to
// end_factor * base_lr over total_iters epochs, then constant, as
// torch.optim.lr_scheduler.LinearLR.
#pragma once

#include <cstdint>

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

struct LinearLROptions {
  double start_factor = 1.0 / 3;
  double end_factor = 1.0;
  int64_t total_iters = 5;
};

class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, LinearLROptions options = {});

 protected:
  std::vector<double> get_lr() const override;

 private:
  LinearLROptions options_;
};

}  // namespace kiln::optim
