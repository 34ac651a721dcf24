// AdamW: options checks and the step loop (the update is in adam_update.cpp).
#include "kiln/optim/adamw.h"

#include "adam_update.h"
#include "kiln/autograd.h"

namespace kiln::optim {

void AdamWOptions::validate(const std::string& optimizer) const {
  detail::validate_adam(optimizer, lr, betas, eps, weight_decay);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : OptimizerOf("AdamW", std::move(params), options) {}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups, AdamWOptions defaults)
    : OptimizerOf("AdamW", std::move(groups), defaults) {}

void AdamW::step() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const AdamWOptions& o = groups_[g].options;
    o.validate(name());
    detail::AdamHyper h{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize, true};
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      check_grad(p, grad);
      detail::adam_update(p, grad, state_at(g, i), h);
    }
  }
}

}  // namespace kiln::optim
