// ExponentialLR: PyTorch's chainable form (scale the current lr each epoch).
#include "kiln/optim/exponential_lr.h"

#include <cmath>

namespace kiln::optim {

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer), gamma_(gamma) {
  KILN_CHECK(std::isfinite(gamma) && gamma > 0, "[ExponentialLR] expected gamma > 0, got ", gamma,
             ". Fix: pass the per-epoch decay factor, e.g. 0.95.");
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    lrs.push_back(last_epoch_ == 0 ? group_lr(g) : group_lr(g) * gamma_);
  return lrs;
}

}  // namespace kiln::optim
