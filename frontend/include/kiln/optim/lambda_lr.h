// LambdaLR: each group's lr is its base lr times a function of the epoch, as
// torch.optim.lr_scheduler.LambdaLR:
//
//   kiln::optim::LambdaLR warmup(opt, [](int64_t epoch) { return std::min(1.0, (epoch + 1) / 10.0); });
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

class LambdaLR : public LRScheduler {
 public:
  using Factor = std::function<double(int64_t epoch)>;
  // One function for every group.
  LambdaLR(Optimizer& optimizer, Factor factor);
  // One function per group, in group order.
  LambdaLR(Optimizer& optimizer, std::vector<Factor> factors);

 protected:
  std::vector<double> get_lr() const override;

 private:
  std::vector<Factor> factors_;
};

}  // namespace kiln::optim
