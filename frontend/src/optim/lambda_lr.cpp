// LambdaLR: base lr times the user's factor for the epoch.
#include "kiln/optim/lambda_lr.h"

#include <cmath>

namespace kiln::optim {

LambdaLR::LambdaLR(Optimizer& optimizer, Factor factor)
    : LambdaLR(optimizer, std::vector<Factor>(optimizer.num_param_groups(), factor)) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Factor> factors)
    : LRScheduler(optimizer), factors_(std::move(factors)) {
  KILN_CHECK(factors_.size() == base_lrs_.size(), "[LambdaLR] expected one function per parameter "
             "group (", base_lrs_.size(), "), got ", factors_.size(),
             ". Fix: pass one function for all groups, or one per group.");
  for (size_t g = 0; g < factors_.size(); ++g)
    KILN_CHECK(factors_[g] != nullptr, "[LambdaLR] the function of group ", g,
               " is empty. Fix: pass a callable epoch -> factor.");
  initial_step();
}

std::vector<double> LambdaLR::get_lr() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double factor = factors_[g](last_epoch_);
    KILN_CHECK(std::isfinite(factor), "[LambdaLR] the function of group ", g, " returned ", factor,
               " for epoch ", last_epoch_, ". Fix: return a finite factor for every epoch.");
    lrs.push_back(base_lrs_[g] * factor);
  }
  return lrs;
}

}  // namespace kiln::optim
