// OneCycleLR (Smith & Topin's 1cycle policy), as torch.optim.lr_scheduler.OneCycleLR: the lr
// rises from max_lr / div_factor to max_lr over the first pct_start of total_steps, then falls
// to max_lr / (div_factor * final_div_factor); the momentum (SGD's, or the Adam family's
// beta1) moves the other way, between max_momentum and base_momentum. It steps once per batch:
//
//   kiln::optim::OneCycleLR sched(opt, {.max_lr = {0.1}, .total_steps = epochs * batches});
//   for (batch ...) { train_step(); sched.step(); }
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

struct OneCycleLROptions {
  std::vector<double> max_lr;  // one for all groups, or one per group
  int64_t total_steps = 0;     // or epochs * steps_per_epoch when 0
  int64_t epochs = 0, steps_per_epoch = 0;
  double pct_start = 0.3;
  bool cosine = true;  // anneal_strategy "cos", else "linear"
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25, final_div_factor = 1e4;
  bool three_phase = false;  // warm up, come back down to the initial lr, then annihilate
};

class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, OneCycleLROptions options);

  int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> get_lr() const override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;  // 0: initial, 1: max, 2: min
    bool rising_momentum;  // from base to max momentum (else max to base); constant when null
    bool constant_momentum = false;
  };
  OneCycleLROptions options_;
  int64_t total_steps_ = 0;
  std::vector<double> initial_, max_, min_;  // by group
  std::vector<Phase> phases_;
};

}  // namespace kiln::optim
