// SyncBatchNorm: batch normalization whose statistics are taken over the whole global batch,
// every rank's slice together, as one process with the global batch would compute them
// (PyTorch's torch.nn.SyncBatchNorm). Plain BatchNorm under DistributedDataParallel
// normalizes each rank's slice on its own.
//
//   model = kiln::distributed::convert_sync_batchnorm(model);   // every BatchNorm, in place
//   kiln::distributed::DistributedDataParallel ddp(model);
//
// In training, each forward all-reduces the per-channel sum and count, then the sum of squared
// deviations from the global mean (a two-pass variance, exact for data with a large mean);
// backward flows through both all-reduces (the gradient of one is the all-reduced gradient). Evaluation, and a group of one rank, is plain BatchNorm. The parameters and
// buffers keep BatchNorm's names, so checkpoints move between the two.
#pragma once

#include <memory>

#include "kiln/distributed/process_group.h"
#include "kiln/nn/layers/batch_norm.h"

namespace kiln::distributed {

class SyncBatchNorm : public nn::BatchNorm {
 public:
  // `group`: null for the default group (looked up at each forward).
  explicit SyncBatchNorm(int64_t num_features, nn::BatchNormOptions options = {}, ProcessGroup* group = nullptr);
  Tensor forward(const Tensor& input) override;

 protected:
  void check_input_dim(const Tensor& input) const override;

 private:
  ProcessGroup* group_;
};

// Replaces every BatchNorm1d/2d in `module`'s tree by a SyncBatchNorm with the same options,
// parameters, buffers and training mode, and returns the module (a new SyncBatchNorm when
// `module` itself is a BatchNorm). Like replace_module, it edits the tree: a member that held
// an old BatchNorm still does, and calling that now unregistered module from its parent's
// forward is the registration error. Containers (Sequential, ModuleList, ...) see the new
// layers. Optimizers built before hold the old parameters: convert first.
std::shared_ptr<nn::Module> convert_sync_batchnorm(std::shared_ptr<nn::Module> module, ProcessGroup* group = nullptr);

// The sum of `tensor` over the ranks, differentiable: its gradient is the sum of the ranks'
// gradients (torch.distributed.nn.functional.all_reduce). Every rank must call it, and run
// its backward, in the same order.
Tensor all_reduce_with_grad(const Tensor& tensor, ProcessGroup& group);

}  // namespace kiln::distributed
