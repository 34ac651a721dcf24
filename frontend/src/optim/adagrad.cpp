// Adagrad: PyTorch's update with in-place kiln ops.
#include "kiln/optim/adagrad.h"

#include "kiln/tensor_ops/factory.h"
#include "option_checks.h"

namespace kiln::optim {

void AdagradOptions::validate(const std::string& optimizer) const {
  detail::check_at_least(optimizer, "lr", lr, 0);
  detail::check_at_least(optimizer, "lr_decay", lr_decay, 0);
  detail::check_at_least(optimizer, "weight_decay", weight_decay, 0);
  detail::check_at_least(optimizer, "initial_accumulator_value", initial_accumulator_value, 0);
  detail::check_at_least(optimizer, "eps", eps, 0);
}

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : OptimizerOf("Adagrad", std::move(params), options) {}

Adagrad::Adagrad(std::vector<ParamGroup<AdagradOptions>> groups, AdagradOptions defaults)
    : OptimizerOf("Adagrad", std::move(groups), defaults) {}

void Adagrad::step() {
  update_each([](Tensor& p, Tensor grad, ParamState& s, const AdagradOptions& o) {
    if (s.buffers.find("sum") == s.buffers.end())
      s.buffers.emplace("sum", full_like(p, o.initial_accumulator_value));
    s.step += 1;
    if (o.weight_decay != 0) grad = add(grad, p, o.weight_decay);
    const double clr = o.lr / (1 + static_cast<double>(s.step - 1) * o.lr_decay);
    Tensor& sum = s.buffers.at("sum");
    sum.add_(mul(grad, grad));
    p.add_(div(grad, sqrt(sum).add_(o.eps)), -clr);
  });
}

}  // namespace kiln::optim
