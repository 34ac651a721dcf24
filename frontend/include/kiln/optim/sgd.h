// Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight
// decay: PyTorch's torch.optim.SGD update, step for step.
#pragma once

#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2 penalty added to the gradient
  bool nesterov = false;
  bool maximize = false;  // ascend the objective instead

  template <class V>
  void fields(V& v) {
    v("lr", lr);
    v("momentum", momentum);
    v("dampening", dampening);
    v("weight_decay", weight_decay);
    v("nesterov", nesterov);
    v("maximize", maximize);
  }
  void validate(const std::string& optimizer) const;
};

// Per parameter, with g its gradient (negated when maximize):
//   g += weight_decay * p
//   b = g on the first step, then b = momentum * b + (1 - dampening) * g
//   g = nesterov ? g + momentum * b : b          (when momentum != 0)
//   p -= lr * g
class SGD : public OptimizerOf<SGDOptions> {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup<SGDOptions>> groups, SGDOptions defaults = {});
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
};

}  // namespace kiln::optim
