// CosineAnnealingLR: PyTorch's chainable recurrence (each lr derived from the current one),
// which equals the closed form when nothing else changes the lr.
#include "kiln/optim/cosine_annealing_lr.h"

#include <cmath>
#include <numbers>

namespace kiln::optim {

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  KILN_CHECK(T_max > 0,
             "[CosineAnnealingLR] expected T_max >= 1 (epochs of one half cosine), "
             "got ",
             T_max, ". Fix: pass the number of epochs (or steps) to anneal over.");
  KILN_CHECK(std::isfinite(eta_min), "[CosineAnnealingLR] expected a finite eta_min, got ", eta_min,
             ". Fix: pass the final lr, e.g. 0.");
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  const double pi = std::numbers::pi;
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    double lr = group_lr(g);
    if (last_epoch_ == 0) {
      lrs.push_back(lr);
    } else if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
      // The recurrence below divides by zero here (the minimum): step up from it instead.
      lrs.push_back(lr + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / T)) / 2);
    } else {
      lrs.push_back((1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) *
                        (lr - eta_min_) +
                    eta_min_);
    }
  }
  return lrs;
}

}  // namespace kiln::optim
