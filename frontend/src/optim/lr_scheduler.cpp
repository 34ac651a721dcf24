// LRScheduler base: records the base lrs and writes the schedule into the optimizer.
#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    base_lrs_.push_back(optimizer.initial_lr(g));
}

void LRScheduler::step() {
  KILN_CHECK(optimizer_.num_param_groups() == base_lrs_.size(), "[LRScheduler.step] the ",
             optimizer_.name(), " optimizer has ", optimizer_.num_param_groups(),
             " parameter group(s) but the scheduler was built when it had ", base_lrs_.size(),
             ". Fix: add every parameter group before building the scheduler.");
  ++step_count_;
  ++last_epoch_;
  std::vector<double> lrs = get_lr();
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_lr_ = std::move(lrs);
}

}  // namespace kiln::optim
