// SequentialLR: PyTorch's hand-over at each milestone.
#include "kiln/optim/sequential_lr.h"

#include <algorithm>

namespace kiln::optim {

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers,
                           std::vector<int64_t> milestones)
    : optimizer_(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  const char* where = "[SequentialLR] ";
  KILN_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), where,
             "expected one milestone fewer than schedulers, got ", schedulers_.size(),
             " scheduler(s) and ", milestones_.size(), " milestone(s). Fix: pass the epoch at which "
             "each scheduler after the first takes over.");
  for (size_t i = 0; i < schedulers_.size(); ++i)
    KILN_CHECK(schedulers_[i] && &schedulers_[i]->optimizer_ == &optimizer, where, "scheduler ", i,
               " is null or drives another optimizer. Fix: build every part on this optimizer.");
  KILN_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()) &&
                 (milestones_.empty() || milestones_.front() > 0),
             where, "expected increasing positive milestones. Fix: pass e.g. {5, 50}.");
  // Building each part took its first step; only the first one's counts.
  restart(*schedulers_.front());
  last_lr_ = schedulers_.front()->get_last_lr();
}

void SequentialLR::restart(LRScheduler& s) {
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) optimizer_.set_lr(g, s.base_lrs_.at(g));
  s.last_epoch_ = -1;
  s.step();
}

void SequentialLR::step() {
  ++last_epoch_;
  const auto index = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[index];
  if (index > 0 && milestones_[index - 1] == last_epoch_)
    restart(s);
  else
    s.step();
  last_lr_ = s.get_last_lr();
}

}  // namespace kiln::optim
