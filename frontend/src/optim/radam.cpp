// RAdam: PyTorch's update with in-place kiln ops.
#include "kiln/optim/radam.h"

#include <cmath>

#include "adam_update.h"

namespace kiln::optim {

void RAdamOptions::validate(const std::string& optimizer) const {
  detail::validate_adam(optimizer, lr, betas, eps, weight_decay);
}

RAdam::RAdam(std::vector<Tensor> params, RAdamOptions options)
    : OptimizerOf("RAdam", std::move(params), options) {}

RAdam::RAdam(std::vector<ParamGroup<RAdamOptions>> groups, RAdamOptions defaults)
    : OptimizerOf("RAdam", std::move(groups), defaults) {}

void RAdam::step() {
  update_each([](Tensor& p, Tensor grad, ParamState& s, const RAdamOptions& o) {
    const auto [beta1, beta2] = o.betas;
    s.step += 1;
    const double t = static_cast<double>(s.step);
    detail::decay_and_update_moments(p, grad, s, o.lr, o.weight_decay, o.decoupled_weight_decay,
                                     o.betas);
    const Tensor& exp_avg = s.buffers.at("exp_avg");
    const Tensor& exp_avg_sq = s.buffers.at("exp_avg_sq");
    const double bias_correction1 = 1 - std::pow(beta1, t);
    const double bias_correction2 = 1 - std::pow(beta2, t);
    const double rho_inf = 2 / (1 - beta2) - 1;
    const double rho_t = rho_inf - 2 * t * std::pow(beta2, t) / bias_correction2;
    if (rho_t > 5) {
      const double rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                                    ((rho_inf - 4) * (rho_inf - 2) * rho_t));
      const Tensor adaptive = sqrt(exp_avg_sq).add_(o.eps);
      p.add_(div(exp_avg, adaptive), -o.lr / bias_correction1 * rect * std::sqrt(bias_correction2));
    } else {
      p.add_(exp_avg, -o.lr / bias_correction1);
    }
  });
}

}  // namespace kiln::optim
