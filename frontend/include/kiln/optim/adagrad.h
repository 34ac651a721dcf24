// Adagrad (Duchi et al.) with learning-rate decay and L2 weight decay: PyTorch's
// torch.optim.Adagrad update, step for step.
#pragma once

#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("lr_decay", lr_decay);
    v("weight_decay", weight_decay);
    v("initial_accumulator_value", initial_accumulator_value);
    v("eps", eps);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter at step t, with g its gradient (negated when maximize):
//   g += weight_decay * p
//   s += g^2              (s starts at initial_accumulator_value)
//   p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)
class Adagrad : public OptimizerOf<AdagradOptions> {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  Adagrad(std::vector<ParamGroup<AdagradOptions>> groups, AdagradOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"sum"}; }
};

}  // namespace kiln::optim
