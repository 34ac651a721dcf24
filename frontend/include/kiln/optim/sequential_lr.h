// SequentialLR: schedulers that take turns, as torch.optim.lr_scheduler.SequentialLR: the
// first until milestones[0], the second until milestones[1], and so on; each starts its own
// schedule afresh (epoch 0, from the groups' initial lrs) at its milestone.
//
//   kiln::optim::LinearLR warmup(opt, {.start_factor = 0.1, .total_iters = 5});
//   kiln::optim::CosineAnnealingLR decay(opt, 95);
//   kiln::optim::SequentialLR sched(opt, {&warmup, &decay}, {5});
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

class SequentialLR {
 public:
  // The schedulers (built on `optimizer`, outliving this) and one milestone fewer than them,
  // increasing.
  SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers, std::vector<int64_t> milestones);

  void step();
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }

 private:
  // Starts `s` over at epoch 0 from the initial lrs.
  void restart(LRScheduler& s);

  Optimizer& optimizer_;
  std::vector<LRScheduler*> schedulers_;
  std::vector<int64_t> milestones_;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace kiln::optim
