// LinearLR: PyTorch's chainable form, each epoch's lr the previous one times the ratio of
// consecutive factors, so a manual lr change made between steps is kept.
#include "kiln/optim/linear_lr.h"

#include <cmath>

namespace kiln::optim {

LinearLR::LinearLR(Optimizer& optimizer, LinearLROptions options)
    : LRScheduler(optimizer), options_(options) {
  KILN_CHECK(options.start_factor > 0 && options.start_factor <= 1, "[LinearLR] expected "
             "start_factor in (0, 1], got ", options.start_factor,
             ". Fix: pass the first epoch's fraction of the lr, e.g. 0.1.");
  KILN_CHECK(options.end_factor >= 0 && options.end_factor <= 1, "[LinearLR] expected end_factor "
             "in [0, 1], got ", options.end_factor, ". Fix: pass the final fraction of the lr.");
  KILN_CHECK(options.total_iters >= 0, "[LinearLR] expected total_iters >= 0, got ",
             options.total_iters, ". Fix: pass the number of epochs the ramp takes.");
  initial_step();
}

std::vector<double> LinearLR::get_lr() const {
  const double start = options_.start_factor, end = options_.end_factor;
  const auto total = static_cast<double>(options_.total_iters);
  const auto epoch = static_cast<double>(last_epoch_);
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    if (last_epoch_ == 0)
      lrs.push_back(group_lr(g) * start);
    else if (last_epoch_ > options_.total_iters)
      lrs.push_back(group_lr(g));
    else
      lrs.push_back(group_lr(g) * (1 + (end - start) / (total * start + (epoch - 1) * (end - start))));
  }
  return lrs;
}

}  // namespace kiln::optim
