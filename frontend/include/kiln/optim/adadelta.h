// Adadelta (Zeiler) with L2 weight decay: PyTorch's torch.optim.Adadelta update, step for
// step.
#pragma once

#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdadeltaOptions {
  double lr = 1.0;  // scales the update (the method itself has no learning rate)
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;
  bool maximize = false;

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("rho", rho);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter, with g its gradient (negated when maximize):
//   g += weight_decay * p
//   v = rho * v + (1 - rho) * g^2
//   d = sqrt(u + eps) / sqrt(v + eps) * g
//   u = rho * u + (1 - rho) * d^2
//   p -= lr * d
class Adadelta : public OptimizerOf<AdadeltaOptions> {
 public:
  Adadelta(std::vector<Tensor> params, AdadeltaOptions options = {});
  Adadelta(std::vector<ParamGroup<AdadeltaOptions>> groups, AdadeltaOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"square_avg", "acc_delta"}; }
};

}  // namespace kiln::optim
