// The Adam/AdamW update: PyTorch's single-tensor algorithm with in-place kiln ops.
#include "adam_update.h"

#include <cmath>

#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::optim::detail {

void validate_adam(const std::string& optimizer, double lr, std::pair<double, double> betas,
                   double eps, double weight_decay) {
  const char* fix = " Fix: pass a value in range in the options (or param_groups()[g].options).";
  KILN_CHECK(std::isfinite(lr) && lr >= 0, "[", optimizer, "] expected lr >= 0, got ", lr, ".",
             fix);
  KILN_CHECK(betas.first >= 0 && betas.first < 1, "[", optimizer,
             "] expected betas.first in [0, 1), got ", betas.first, ".", fix);
  KILN_CHECK(betas.second >= 0 && betas.second < 1, "[", optimizer,
             "] expected betas.second in [0, 1), got ", betas.second, ".", fix);
  KILN_CHECK(std::isfinite(eps) && eps >= 0, "[", optimizer, "] expected eps >= 0, got ", eps, ".",
             fix);
  KILN_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "[", optimizer,
             "] expected weight_decay >= 0, got ", weight_decay, ".", fix);
}

void adam_update(Tensor p, Tensor grad, ParamState& s, const AdamHyper& h) {
  auto [beta1, beta2] = h.betas;
  if (h.maximize) grad = neg(grad);
  s.step += 1;
  if (h.weight_decay != 0) {
    if (h.decoupled)
      p.mul_(1 - h.lr * h.weight_decay);
    else
      grad = add(grad, p, h.weight_decay);
  }
  auto state_buffer = [&](const char* key) -> Tensor& {
    auto it = s.buffers.find(key);
    if (it == s.buffers.end()) it = s.buffers.emplace(key, zeros_like(p)).first;
    return it->second;
  };
  Tensor& m = state_buffer("exp_avg");
  Tensor& v = state_buffer("exp_avg_sq");
  m.mul_(beta1).add_(grad, 1 - beta1);
  v.mul_(beta2).add_(mul(grad, grad), 1 - beta2);
  double t = static_cast<double>(s.step);
  double step_size = h.lr / (1 - std::pow(beta1, t));
  double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, t));
  Tensor second = v;
  if (h.amsgrad) {
    Tensor& v_max = state_buffer("max_exp_avg_sq");
    v_max.copy_(maximum(v_max, v));
    second = v_max;
  }
  Tensor denom = sqrt(second);
  denom.div_(bias_correction2_sqrt).add_(h.eps);
  p.add_(div(m, denom), -step_size);
}

Tensor decay_and_update_moments(Tensor& param, Tensor grad, ParamState& state, double lr,
                                double weight_decay, bool decoupled, std::pair<double, double> betas) {
  if (weight_decay != 0) {
    if (decoupled)
      param.mul_(1 - lr * weight_decay);
    else
      grad = add(grad, param, weight_decay);
  }
  auto moment = [&](const char* key) -> Tensor& {
    auto it = state.buffers.find(key);
    if (it == state.buffers.end()) it = state.buffers.emplace(key, zeros_like(param)).first;
    return it->second;
  };
  moment("exp_avg").mul_(betas.first).add_(grad, 1 - betas.first);
  moment("exp_avg_sq").mul_(betas.second).add_(mul(grad, grad), 1 - betas.second);
  return grad;
}

}  // namespace kiln::optim::detail
