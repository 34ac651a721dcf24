// NAdam: PyTorch's update with in-place kiln ops; the momentum product stays on the host.
#include "kiln/optim/nadam.h"

#include <cmath>

#include "adam_update.h"
#include "option_checks.h"

namespace kiln::optim {

void NAdamOptions::validate(const std::string& optimizer) const {
  detail::validate_adam(optimizer, lr, betas, eps, weight_decay);
  detail::check_at_least(optimizer, "momentum_decay", momentum_decay, 0);
}

NAdam::NAdam(std::vector<Tensor> params, NAdamOptions options)
    : OptimizerOf("NAdam", std::move(params), options) {}

NAdam::NAdam(std::vector<ParamGroup<NAdamOptions>> groups, NAdamOptions defaults)
    : OptimizerOf("NAdam", std::move(groups), defaults) {}

void NAdam::step() {
  update_each([](Tensor& p, Tensor grad, ParamState& s, const NAdamOptions& o) {
    const auto [beta1, beta2] = o.betas;
    s.step += 1;
    const double t = static_cast<double>(s.step);
    grad = detail::decay_and_update_moments(p, grad, s, o.lr, o.weight_decay,
                                            o.decoupled_weight_decay, o.betas);
    const double mu = beta1 * (1 - 0.5 * std::pow(0.96, t * o.momentum_decay));
    const double mu_next = beta1 * (1 - 0.5 * std::pow(0.96, (t + 1) * o.momentum_decay));
    double& mu_product = s.scalars.try_emplace("mu_product", 1.0).first->second;
    mu_product *= mu;
    const Tensor& exp_avg = s.buffers.at("exp_avg");
    const Tensor& exp_avg_sq = s.buffers.at("exp_avg_sq");
    const Tensor denom = sqrt(exp_avg_sq / (1 - std::pow(beta2, t))).add_(o.eps);
    p.add_(div(grad, denom), -o.lr * (1 - mu) / (1 - mu_product));
    p.add_(div(exp_avg, denom), -o.lr * mu_next / (1 - mu_product * mu_next));
  });
}

}  // namespace kiln::optim
