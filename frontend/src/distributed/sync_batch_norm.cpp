// SyncBatchNorm and the differentiable all-reduce it is built on.
#include "kiln/distributed/sync_batch_norm.h"

#include "autograd/record.h"
#include "kiln/autograd.h"
#include "kiln/distributed/init.h"
#include "kiln/error.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln::distributed {
namespace {

// The vjp of a sum over ranks: every rank's output depends on every rank's input, so the
// gradient of an input is the sum of the ranks' output gradients.
class AllReduceBackward final : public autograd::Node {
 public:
  explicit AllReduceBackward(ProcessGroup& group) : group_(group) {}
  Tensors apply(Tensors&& grads) override {
    Tensor g = grads[0].contiguous().clone();
    group_.all_reduce(g, ReduceOp::Sum);
    return {g};
  }
  std::string name() const override { return "AllReduceBackward"; }

 private:
  ProcessGroup& group_;
};

}  // namespace

Tensor all_reduce_with_grad(const Tensor& tensor, ProcessGroup& group) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = tensor.contiguous().clone();
  }
  group.all_reduce(out, ReduceOp::Sum);
  if (is_grad_enabled() && tensor.requires_grad()) {
    auto node = std::make_shared<AllReduceBackward>(group);
    node->next_edges.push_back(autograd::gradient_edge(tensor));
    node->output_types.push_back({out.dtype(), Shape(out.sizes()), out.device()});
    node->sequence_nr = autograd::next_sequence_nr();
    AutogradMeta& meta = out.impl()->autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = 0;
  }
  return out;
}

SyncBatchNorm::SyncBatchNorm(int64_t num_features, nn::BatchNormOptions options, ProcessGroup* group)
    : nn::BatchNorm(num_features, options), group_(group) {}

void SyncBatchNorm::check_input_dim(const Tensor& input) const {
  KILN_CHECK(input.dim() >= 2, "[SyncBatchNorm] expected an input [N, C, ...] of 2 or more dims, got ",
             input.type_str(), ". Fix: batch the input.");
}

Tensor SyncBatchNorm::forward(const Tensor& input) {
  ProcessGroup* group = group_ ? group_ : (is_initialized() ? &default_group() : nullptr);
  // Batch statistics are used in training (and always without running statistics).
  bool batch_stats = is_training() || !running_mean.defined();
  if (!batch_stats || !group || group->size() == 1) return nn::BatchNorm::forward(input);
  check_input_dim(input);
  const int64_t C = num_features;
  KILN_CHECK(input.size(1) == C, "[SyncBatchNorm] expected ", C, " channels in dim 1, got ", input.type_str(),
             ". Fix: build SyncBatchNorm(", input.size(1), "), or check the layer before it.");
  std::vector<int64_t> reduce_dims = {0};
  std::vector<int64_t> stat_shape(static_cast<size_t>(input.dim()), 1);
  stat_shape[1] = C;
  for (int64_t d = 2; d < input.dim(); ++d) reduce_dims.push_back(d);
  // Two all-reduces, both differentiable: [sum, count] gives the global mean, then the sum of
  // squared deviations from it gives the variance. A two-pass variance stays exact for data
  // with a large mean, where E[x²] - E[x]² in one pass cancels catastrophically.
  Tensor count = full({1}, static_cast<double>(input.numel() / C), input.dtype());
  Tensor totals = all_reduce_with_grad(cat({sum(input, reduce_dims), count}, 0), *group);
  const double n = totals.narrow(0, C, 1).detach().item<double>();
  KILN_CHECK(n > 1 || !is_training(), "[SyncBatchNorm] expected more than 1 value per channel over all ranks in "
             "training, got ", n, " (", input.type_str(), " on this rank). Fix: use a larger batch.");
  Tensor mean = totals.narrow(0, 0, C) / n;
  Tensor centered = input - mean.reshape(stat_shape);
  Tensor var = all_reduce_with_grad(sum(centered * centered, reduce_dims), *group) / n;  // biased, as normalization uses
  if (is_training() && options.track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    double factor = options.momentum ? *options.momentum
                                     : 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
    running_mean.mul_(1 - factor).add_(mean.detach() * factor);
    running_var.mul_(1 - factor).add_(var.detach() * (n / (n - 1)) * factor);  // unbiased, as PyTorch keeps
  }
  Tensor y = centered * rsqrt(var + options.eps).reshape(stat_shape);
  if (options.affine) y = y * weight.reshape(stat_shape) + bias.reshape(stat_shape);
  return y;
}

std::shared_ptr<nn::Module> convert_sync_batchnorm(std::shared_ptr<nn::Module> module, ProcessGroup* group) {
  KILN_CHECK(module, "convert_sync_batchnorm: the module is null.");
  auto converted = [&](nn::BatchNorm& bn) {
    auto sync = std::make_shared<SyncBatchNorm>(bn.num_features, bn.options, group);
    NoGradGuard no_grad;
    if (bn.weight.defined()) {
      sync->weight.copy_(bn.weight);
      sync->weight.set_requires_grad(bn.weight.requires_grad());
      sync->bias.copy_(bn.bias);
      sync->bias.set_requires_grad(bn.bias.requires_grad());
    }
    if (bn.running_mean.defined()) {
      sync->running_mean.copy_(bn.running_mean);
      sync->running_var.copy_(bn.running_var);
      sync->num_batches_tracked.copy_(bn.num_batches_tracked);
    }
    sync->train(bn.is_training());
    return sync;
  };
  if (auto* bn = dynamic_cast<nn::BatchNorm*>(module.get()); bn && !dynamic_cast<SyncBatchNorm*>(bn))
    return converted(*bn);
  for (nn::Module* parent : module->modules()) {
    nn::NamedModules children = parent->named_children();  // a copy: replacing edits the list
    for (const auto& [name, child] : children) {
      auto* bn = dynamic_cast<nn::BatchNorm*>(child.get());
      if (bn && !dynamic_cast<SyncBatchNorm*>(bn)) parent->replace_module(name, converted(*bn));
    }
  }
  return module;
}

}  // namespace kiln::distributed
