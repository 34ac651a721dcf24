// ReduceLROnPlateau: cuts each group's lr by `factor` once a metric (a validation loss, an
// accuracy) has stopped improving for `patience` epochs, as
// torch.optim.lr_scheduler.ReduceLROnPlateau:
//
//   kiln::optim::ReduceLROnPlateau plateau(opt, {.patience = 3});
//   for (epoch ...) { train(); plateau.step(validation_loss); }
//
// It is driven by the metric, not the epoch count, so it is not an LRScheduler. A NaN metric
// is never an improvement (a bad epoch), as in PyTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct ReduceLROnPlateauOptions {
  bool maximize = false;    // PyTorch's mode="max": higher is better (an accuracy)
  double factor = 0.1;      // new lr = lr * factor
  int64_t patience = 10;    // bad epochs tolerated before a cut
  double threshold = 1e-4;  // how much better counts as better
  bool relative_threshold = true;  // threshold_mode "rel" (a fraction of the best) or "abs"
  int64_t cooldown = 0;     // epochs after a cut during which bad epochs are not counted
  std::vector<double> min_lr = {0};  // one for all groups, or one per group
  double eps = 1e-8;        // a cut smaller than this is skipped
};

class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});

  // Records this epoch's metric and cuts the lrs when it has not improved for too long.
  void step(double metric);

  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

 private:
  bool is_better(double metric) const;

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace kiln::optim
