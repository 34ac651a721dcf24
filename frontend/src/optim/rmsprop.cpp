// RMSprop: PyTorch's update rules, written with in-place kiln ops under NoGradGuard.
#include "kiln/optim/rmsprop.h"

#include <cmath>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::optim {

void RMSpropOptions::validate(const std::string& optimizer) const {
  const char* fix = " Fix: pass a value in range in the options (or param_groups()[g].options).";
  KILN_CHECK(std::isfinite(lr) && lr >= 0, "[", optimizer, "] expected lr >= 0, got ", lr, ".",
             fix);
  KILN_CHECK(std::isfinite(alpha) && alpha >= 0, "[", optimizer, "] expected alpha >= 0, got ",
             alpha, ".", fix);
  KILN_CHECK(std::isfinite(eps) && eps >= 0, "[", optimizer, "] expected eps >= 0, got ", eps, ".",
             fix);
  KILN_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "[", optimizer,
             "] expected weight_decay >= 0, got ", weight_decay, ".", fix);
  KILN_CHECK(std::isfinite(momentum) && momentum >= 0, "[", optimizer,
             "] expected momentum >= 0, got ", momentum, ".", fix);
}

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : OptimizerOf("RMSprop", std::move(params), options) {}

RMSprop::RMSprop(std::vector<ParamGroup<RMSpropOptions>> groups, RMSpropOptions defaults)
    : OptimizerOf("RMSprop", std::move(groups), defaults) {}

void RMSprop::step() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const RMSpropOptions& o = groups_[g].options;
    o.validate(name());
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      Tensor p = groups_[g].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      check_grad(p, grad);
      if (o.maximize) grad = neg(grad);
      ParamState& s = state_at(g, i);
      s.step += 1;
      if (o.weight_decay != 0) grad = add(grad, p, o.weight_decay);
      Tensor& square_avg = buffer(s, "square_avg", p);
      square_avg.mul_(o.alpha).add_(mul(grad, grad), 1 - o.alpha);
      Tensor avg;
      if (o.centered) {
        Tensor& grad_avg = buffer(s, "grad_avg", p);
        grad_avg.mul_(o.alpha).add_(grad, 1 - o.alpha);
        avg = sqrt(sub(square_avg, mul(grad_avg, grad_avg)));
      } else {
        avg = sqrt(square_avg);
      }
      avg.add_(o.eps);
      if (o.momentum > 0) {
        Tensor& buf = buffer(s, "momentum_buffer", p);
        buf.mul_(o.momentum).add_(div(grad, avg));
        p.add_(buf, -o.lr);
      } else {
        p.add_(div(grad, avg), -o.lr);
      }
    }
  }
}

}  // namespace kiln::optim
