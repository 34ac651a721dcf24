// OneCycleLR: PyTorch's phases, annealing and momentum cycling.
#include "kiln/optim/one_cycle_lr.h"

#include <cmath>
#include <numbers>

namespace kiln::optim {

OneCycleLR::OneCycleLR(Optimizer& optimizer, OneCycleLROptions options)
    : LRScheduler(optimizer), options_(std::move(options)) {
  const char* where = "[OneCycleLR] ";
  const OneCycleLROptions& o = options_;
  total_steps_ = o.total_steps > 0 ? o.total_steps : o.epochs * o.steps_per_epoch;
  KILN_CHECK(total_steps_ > 0, where, "expected total_steps > 0, or epochs and steps_per_epoch > 0; "
             "got total_steps ", o.total_steps, ", epochs ", o.epochs, ", steps_per_epoch ",
             o.steps_per_epoch, ". Fix: pass the number of optimizer steps the cycle covers.");
  KILN_CHECK(o.pct_start > 0 && o.pct_start < 1, where, "expected pct_start in (0, 1), got ",
             o.pct_start, ". Fix: pass the fraction of the cycle spent warming up, e.g. 0.3.");
  KILN_CHECK(o.div_factor > 0 && o.final_div_factor > 0, where, "expected div_factor and "
             "final_div_factor > 0, got ", o.div_factor, " and ", o.final_div_factor, ".");
  const size_t groups = base_lrs_.size();
  KILN_CHECK(o.max_lr.size() == 1 || o.max_lr.size() == groups, where, "expected one max_lr or one "
             "per parameter group (", groups, "), got ", o.max_lr.size(),
             ". Fix: pass {max_lr} or a list with one value per group.");
  for (size_t g = 0; g < groups; ++g) {
    max_.push_back(o.max_lr.size() == 1 ? o.max_lr[0] : o.max_lr[g]);
    initial_.push_back(max_.back() / o.div_factor);
    min_.push_back(initial_.back() / o.final_div_factor);
    base_lrs_[g] = initial_.back();  // PyTorch's group["initial_lr"] for this schedule
    optimizer.set_lr(g, initial_.back());
    if (o.cycle_momentum) {
      KILN_CHECK(optimizer.momentum(g).has_value(), where, optimizer.name(),
                 " has no momentum to cycle. Fix: set cycle_momentum = false.");
      optimizer.set_momentum(g, o.max_momentum);
    }
  }
  const auto total = static_cast<double>(total_steps_);
  if (o.three_phase) {
    phases_ = {{o.pct_start * total - 1, 0, 1, false},
               {2 * o.pct_start * total - 2, 1, 0, true},
               {total - 1, 0, 2, false, true}};
  } else {
    phases_ = {{o.pct_start * total - 1, 0, 1, false}, {total - 1, 1, 2, true}};
  }
  initial_step();
}

std::vector<double> OneCycleLR::get_lr() const {
  KILN_CHECK(last_epoch_ <= total_steps_, "[OneCycleLR] stepped ", last_epoch_,
             " times, past the cycle's ", total_steps_, " steps. Fix: pass total_steps (or epochs "
             "and steps_per_epoch) covering every step() call.");
  const auto step = static_cast<double>(last_epoch_);
  auto anneal = [&](double from, double to, double pct) {
    return options_.cosine ? to + (from - to) / 2 * (1 + std::cos(std::numbers::pi * pct))
                           : (to - from) * pct + from;
  };
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double levels[3] = {initial_[g], max_[g], min_[g]};
    double start = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (step <= p.end_step || i + 1 == phases_.size()) {
        const double pct = (step - start) / (p.end_step - start);
        lrs.push_back(anneal(levels[p.start_lr], levels[p.end_lr], pct));
        if (options_.cycle_momentum) {
          const double lo = options_.base_momentum, hi = options_.max_momentum;
          optimizer_.set_momentum(g, p.constant_momentum ? hi
                                     : p.rising_momentum ? anneal(lo, hi, pct)
                                                         : anneal(hi, lo, pct));
        }
        break;
      }
      start = p.end_step;
    }
  }
  return lrs;
}

}  // namespace kiln::optim
