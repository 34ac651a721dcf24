// LRScheduler: the base of learning-rate schedules. It writes each group's lr into the
// optimizer on every step(), as torch.optim.lr_scheduler does.
//
//   kiln::optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (epoch ...) { train(); sched.step(); }
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch and sets every group's lr.
  void step();
  // The lrs set by the last step() (one per group).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  // The lrs the groups had when the first scheduler was attached to the optimizer
  // (Optimizer::initial_lr).
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // 0 after construction, +1 per step().
  int64_t last_epoch() const { return last_epoch_; }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  friend class SequentialLR;  // restarts its parts
  // Derived constructors call this last: it takes the first step (epoch 0), as PyTorch's
  // constructor does (a virtual call cannot run from the base constructor).
  void initial_step() { step(); }
  // The lr of each group for last_epoch_, given the current ones (PyTorch's chainable form).
  virtual std::vector<double> get_lr() const = 0;
  double group_lr(size_t group) const { return optimizer_.lr(group); }

  Optimizer& optimizer_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
};

}  // namespace kiln::optim
