// StepLR: PyTorch's chainable form (scale the current lr at each boundary), so a manual
// lr change made between steps is kept, as in PyTorch.
#include "kiln/optim/step_lr.h"

#include <cmath>

namespace kiln::optim {

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK(step_size > 0, "[StepLR] expected step_size >= 1 (epochs between decays), got ",
             step_size, ". Fix: pass a positive step_size.");
  KILN_CHECK(std::isfinite(gamma), "[StepLR] expected a finite gamma, got ", gamma,
             ". Fix: pass the decay factor, e.g. 0.1.");
  initial_step();
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs;
  bool boundary = last_epoch_ != 0 && last_epoch_ % step_size_ == 0;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    lrs.push_back(boundary ? group_lr(g) * gamma_ : group_lr(g));
  return lrs;
}

}  // namespace kiln::optim
