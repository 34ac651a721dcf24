// Adamax: PyTorch's update with in-place kiln ops.
#include "kiln/optim/adamax.h"

#include <cmath>

#include "adam_update.h"

namespace kiln::optim {

void AdamaxOptions::validate(const std::string& optimizer) const {
  detail::validate_adam(optimizer, lr, betas, eps, weight_decay);
}

Adamax::Adamax(std::vector<Tensor> params, AdamaxOptions options)
    : OptimizerOf("Adamax", std::move(params), options) {}

Adamax::Adamax(std::vector<ParamGroup<AdamaxOptions>> groups, AdamaxOptions defaults)
    : OptimizerOf("Adamax", std::move(groups), defaults) {}

void Adamax::step() {
  update_each([](Tensor& p, Tensor grad, ParamState& s, const AdamaxOptions& o) {
    const auto [beta1, beta2] = o.betas;
    s.step += 1;
    if (o.weight_decay != 0) grad = add(grad, p, o.weight_decay);
    Tensor& exp_avg = buffer(s, "exp_avg", p);
    Tensor& exp_inf = buffer(s, "exp_inf", p);
    exp_avg.mul_(beta1).add_(grad, 1 - beta1);
    exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs() + o.eps));
    const double clr = o.lr / (1 - std::pow(beta1, static_cast<double>(s.step)));
    p.add_(div(exp_avg, exp_inf), -clr);
  });
}

}  // namespace kiln::optim
