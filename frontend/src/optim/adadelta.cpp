// Adadelta: PyTorch's update with in-place kiln ops.
#include "kiln/optim/adadelta.h"

#include "option_checks.h"

namespace kiln::optim {

void AdadeltaOptions::validate(const std::string& optimizer) const {
  detail::check_at_least(optimizer, "lr", lr, 0);
  KILN_CHECK(rho >= 0 && rho <= 1, "[", optimizer, "] expected rho in [0, 1], got ", rho,
             ". Fix: pass a value in range in the options (or param_groups()[g].options).");
  detail::check_at_least(optimizer, "eps", eps, 0);
  detail::check_at_least(optimizer, "weight_decay", weight_decay, 0);
}

Adadelta::Adadelta(std::vector<Tensor> params, AdadeltaOptions options)
    : OptimizerOf("Adadelta", std::move(params), options) {}

Adadelta::Adadelta(std::vector<ParamGroup<AdadeltaOptions>> groups, AdadeltaOptions defaults)
    : OptimizerOf("Adadelta", std::move(groups), defaults) {}

void Adadelta::step() {
  update_each([](Tensor& p, Tensor grad, ParamState& s, const AdadeltaOptions& o) {
    s.step += 1;
    if (o.weight_decay != 0) grad = add(grad, p, o.weight_decay);
    Tensor& square_avg = buffer(s, "square_avg", p);
    Tensor& acc_delta = buffer(s, "acc_delta", p);
    square_avg.mul_(o.rho).add_(mul(grad, grad), 1 - o.rho);
    Tensor delta = sqrt(acc_delta + o.eps).div_(sqrt(square_avg + o.eps)).mul_(grad);
    acc_delta.mul_(o.rho).add_(mul(delta, delta), 1 - o.rho);
    p.add_(delta, -o.lr);
  });
}

}  // namespace kiln::optim
