// DistributedDataParallel: the same model on every rank, each rank a slice of the batch, the
// gradients averaged over ranks during backward, so that every rank's optimizer takes the same
// step (PyTorch's torch.nn.parallel.DistributedDataParallel).
//
//   kiln::distributed::init();
//   auto model = std::make_shared<Net>();
//   kiln::distributed::DistributedDataParallel ddp(model);
//   kiln::optim::SGD opt(model->parameters(), {.lr = 0.1});
//   for (auto [x, y] : loader) {            // loader over a DistributedSampler
//     auto loss = cross_entropy(ddp(x), y);
//     opt.zero_grad();
//     loss.backward();                       // all-reduces as gradients become ready
//     opt.step();
//   }
//
// At construction rank 0's parameters and buffers are copied to every rank, after checking
// that every rank has the same parameters (a difference is an error naming the first one
// and the ranks). The parameters are cut into buckets of about `bucket_cap_mb`, in reverse
// registration order (roughly the order backward produces their gradients); each bucket's
// all-reduce starts on the communication thread as soon as its last gradient is
// accumulated, while backward goes on with the layers below. Backward returns once every
// bucket is averaged and written back to .grad.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/distributed/process_group.h"
#include "kiln/nn/module.h"

namespace kiln::distributed {

struct DistributedDataParallelOptions {
  ProcessGroup* group = nullptr;  // the default group when null
  double bucket_cap_mb = 25.0;
  // The first bucket (the last layers' gradients) is kept small so that communication starts
  // early in backward, as PyTorch does.
  double first_bucket_cap_mb = 1.0;
  // Copy rank 0's buffers (BatchNorm running statistics) to every rank before each training
  // forward.
  bool broadcast_buffers = true;
  // Off: a parameter that gets no gradient in a backward is an error naming it (a bucket
  // would otherwise never be reduced). On: each forward finds the parameters its output does
  // not depend on and counts them as ready with a zero gradient.
  bool find_unused_parameters = false;
};

// One bucket's reduction, for timelines and tests.
struct BucketEvent {
  int bucket = 0;
  std::chrono::steady_clock::time_point ready;     // its last gradient arrived (launch)
  std::chrono::steady_clock::time_point started;   // the communication thread began it
  std::chrono::steady_clock::time_point finished;
};

struct BackwardTimeline {
  std::vector<BucketEvent> buckets;  // in launch order
  std::chrono::steady_clock::time_point last_gradient;  // the last hook of the backward
  std::chrono::steady_clock::time_point backward_end;   // all buckets written back
};

class DistributedDataParallel : public nn::Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  // The wrapped module's forward. A module whose forward takes other arguments is called
  // directly (kiln::nn::call(*model, a, b)): DistributedDataParallel works through forward
  // hooks on it, so either way gets the buffer broadcast and the unused-parameter search.
  Tensor forward(const Tensor& input) override;

  nn::Module& module() { return *module_; }
  std::shared_ptr<nn::Module> module_ptr() const { return module_; }

  // For gradient accumulation: backward passes inside the guard's scope accumulate into
  // .grad locally without communicating; the first backward after it reduces the sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // How the parameters were bucketed: names per bucket, in reduction order.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  // The last synchronized backward's timeline.
  BackwardTimeline last_timeline() const;

 private:
  struct Reducer;
  std::shared_ptr<nn::Module> module_;
  DistributedDataParallelOptions options_;
  ProcessGroup* group_;
  std::unique_ptr<Reducer> reducer_;
  nn::HookHandle pre_hook_, post_hook_;
};

}  // namespace kiln::distributed
