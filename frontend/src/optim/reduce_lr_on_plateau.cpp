// ReduceLROnPlateau: PyTorch's bookkeeping of the best metric, bad epochs and cooldown.
#include "kiln/optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(optimizer), options_(std::move(options)) {
  const char* where = "[ReduceLROnPlateau] ";
  KILN_CHECK(options_.factor >= 0 && options_.factor < 1, where, "expected factor in [0, 1), got ",
             options_.factor, ". Fix: pass the fraction of the lr to keep, e.g. 0.1.");
  KILN_CHECK(options_.patience >= 0 && options_.cooldown >= 0, where, "expected patience >= 0 and "
             "cooldown >= 0, got ", options_.patience, " and ", options_.cooldown,
             ". Fix: pass epoch counts.");
  KILN_CHECK(std::isfinite(options_.threshold) && options_.threshold >= 0, where,
             "expected threshold >= 0, got ", options_.threshold, ". Fix: pass e.g. 1e-4.");
  const size_t groups = optimizer.num_param_groups();
  KILN_CHECK(options_.min_lr.size() == 1 || options_.min_lr.size() == groups, where, "expected one "
             "min_lr or one per parameter group (", groups, "), got ", options_.min_lr.size(),
             ". Fix: pass {min_lr} or a list with one value per group.");
  min_lrs_ = options_.min_lr.size() == 1 ? std::vector<double>(groups, options_.min_lr[0])
                                         : options_.min_lr;
  best_ = options_.maximize ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
  for (size_t g = 0; g < groups; ++g) last_lr_.push_back(optimizer.lr(g));
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const double t = options_.threshold;
  if (options_.maximize)
    return options_.relative_threshold ? metric > best_ * (1 + t) : metric > best_ + t;
  return options_.relative_threshold ? metric < best_ * (1 - t) : metric < best_ - t;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {  // bad epochs right after a cut do not count
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > options_.patience) {
    for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
      const double old_lr = optimizer_.lr(g);
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_.at(g));
      if (old_lr - new_lr > options_.eps) optimizer_.set_lr(g, new_lr);
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) last_lr_.push_back(optimizer_.lr(g));
}

}  // namespace kiln::optim
