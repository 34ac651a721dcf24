// SGD: PyTorch's update rules, written with in-place kiln ops under NoGradGuard.
#include "kiln/optim/sgd.h"

#include <cmath>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::optim {

void SGDOptions::validate(const std::string& optimizer) const {
  const char* fix = " Fix: pass a value in range in the options (or param_groups()[g].options).";
  KILN_CHECK(std::isfinite(lr) && lr >= 0, "[", optimizer, "] expected lr >= 0, got ", lr, ".",
             fix);
  KILN_CHECK(std::isfinite(momentum) && momentum >= 0, "[", optimizer,
             "] expected momentum >= 0, got ", momentum, ".", fix);
  KILN_CHECK(std::isfinite(dampening), "[", optimizer, "] expected a finite dampening, got ",
             dampening, ".", fix);
  KILN_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "[", optimizer,
             "] expected weight_decay >= 0, got ", weight_decay, ".", fix);
  KILN_CHECK(!nesterov || (momentum > 0 && dampening == 0), "[", optimizer,
             "] Nesterov momentum requires momentum > 0 and dampening == 0, got momentum=",
             momentum, ", dampening=", dampening,
             ". Fix: set momentum (e.g. 0.9) and "
             "dampening = 0, or nesterov = false.");
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : OptimizerOf("SGD", std::move(params), options) {}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups, SGDOptions defaults)
    : OptimizerOf("SGD", std::move(groups), defaults) {}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const SGDOptions& o = groups_[g].options;
    o.validate(name());  // options may have been edited through param_groups()
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      Tensor p = groups_[g].params[i];
      Tensor d = p.grad();
      if (!d.defined()) continue;
      check_grad(p, d);
      if (o.maximize) d = neg(d);
      if (o.weight_decay != 0) d = add(d, p, o.weight_decay);
      if (o.momentum != 0) {
        ParamState& s = state_at(g, i);
        auto it = s.buffers.find("momentum_buffer");
        if (it == s.buffers.end()) {
          it = s.buffers.emplace("momentum_buffer", d.clone()).first;
        } else {
          it->second.mul_(o.momentum).add_(d, 1 - o.dampening);
        }
        d = o.nesterov ? add(d, it->second, o.momentum) : it->second;
      }
      p.add_(d, -o.lr);
    }
  }
}

}  // namespace kiln::optim
