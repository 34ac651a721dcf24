// A process group: the ranks of a job and the collectives they run together, over one
// collective engine: Gloo for CPU tensors, NCCL for CUDA tensors.
//
// Every collective is issued in the same order on every rank and runs on the group's
// communication thread, so a call returns a Work handle at once when asked to
// (`{.async_op = true}`) and the caller overlaps its own work with the transfer:
//
//   auto work = group.all_reduce(grad, ReduceOp::Sum, {.async_op = true});
//   ...                     // more backward
//   work.wait();            // grad now holds the sum over ranks
//
// Tensors are reduced in place, must be contiguous and on the group's device (the CPU for
// gloo, the group's GPU for nccl), and keep their dtype (bool, int32, int64, float16,
// bfloat16, float32, float64). A failure (a peer died, a timeout) surfaces as a kiln::Error
// from wait() naming the operation and the peer; after one, the group is broken and every
// later collective fails at once with the first error.
//
// On nccl, a collective is queued on the group's own CUDA stream after the work already
// queued on the caller's current stream (so inputs written by kernels are ready), and wait()
// returns once the GPU has run it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/distributed/store.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

enum class ReduceOp { Sum, Avg, Max, Min, Product };
std::string_view reduce_op_name(ReduceOp op);

struct CollectiveOptions {
  bool async_op = false;  // return before the collective finishes; wait() on the handle
  // This collective's own deadline; the group's timeout when absent.
  std::optional<Milliseconds> timeout;
};

// The handle of one collective. Copies share the same operation.
class Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Blocks until the collective finished; throws its kiln::Error when it failed.
  void wait() const;
  bool is_completed() const;
  // True when it finished and failed (wait() would throw).
  bool failed() const;
  // "all_reduce #12 (sum, float32[1000])"
  std::string describe() const;
  // When the communication thread started and finished it (steady clock), for timelines.
  std::chrono::steady_clock::time_point started_at() const;
  std::chrono::steady_clock::time_point finished_at() const;

 private:
  std::shared_ptr<State> state_;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;

  // In place: every rank ends with op over the ranks' tensors (Avg: the sum divided by the
  // group size; integers divide toward zero).
  virtual Work all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, CollectiveOptions options = {}) = 0;
  // In place: every rank ends with rank `root`'s tensor.
  virtual Work broadcast(Tensor& tensor, int root = 0, CollectiveOptions options = {}) = 0;
  // outputs[r] receives rank r's `input`. outputs has one tensor per rank, each of rank r's
  // input shape (shapes may differ across ranks in their first dim; dtypes must match).
  virtual Work all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions options = {}) = 0;
  // `output` ([size * n, ...]) receives the ranks' inputs ([n, ...]) stacked along dim 0.
  virtual Work all_gather_into_tensor(Tensor& output, const Tensor& input, CollectiveOptions options = {}) = 0;
  // inputs[r] of every rank are reduced into rank r's `output`; inputs[r] has rank r's output
  // shape (uneven splits are allowed).
  virtual Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::Sum,
                              CollectiveOptions options = {}) = 0;
  // `input` ([size * n, ...]) reduced over ranks; rank r keeps rows [r*n, (r+1)*n) in `output`.
  virtual Work reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                                     CollectiveOptions options = {}) = 0;
  virtual Work barrier(CollectiveOptions options = {}) = 0;

  // The store the group met on (for small out-of-band exchanges and diagnostics).
  virtual Store& store() = 0;
  Milliseconds timeout() const { return timeout_; }

 protected:
  ProcessGroup(int rank, int size, Milliseconds timeout) : rank_(rank), size_(size), timeout_(timeout) {}
  int rank_;
  int size_;
  Milliseconds timeout_;
};

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<Store> store;
  // Deadline of the rendezvous and of every collective (per call in CollectiveOptions).
  Milliseconds timeout{std::chrono::minutes(10)};
  // The address other ranks reach this one on ("" = this host's name, "127.0.0.1" for one
  // machine), or an interface name such as "eth0" (see docs/distributed.md).
  std::string hostname;
  std::string interface;
  // Keys of this group in the store live under "<prefix>/"; two groups on one store need two.
  std::string prefix = "default_pg";
};

// Meets the other ranks through the store (every rank waits up to the timeout; ranks that
// did not come are named), connects a full mesh over TCP and returns the group.
std::unique_ptr<ProcessGroup> make_gloo_group(const GlooOptions& options);

struct NcclOptions {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<Store> store;
  // Deadline of the rendezvous and of every collective (per call in CollectiveOptions): a
  // collective still running after it aborts the communicator and fails the group.
  Milliseconds timeout{std::chrono::minutes(10)};
  // This rank's GPU; -1: KILN_LOCAL_RANK (or LOCAL_RANK) modulo the number of GPUs.
  int device = -1;
  std::string prefix = "default_pg";
};

// Meets the other ranks through the store (rank 0 publishes NCCL's unique id there) and
// creates the NCCL communicator on this rank's GPU. NCCL is loaded at run time
// (kiln/cuda/nccl.h): without it, or without a GPU, this is a kiln::Error saying why.
std::unique_ptr<ProcessGroup> make_nccl_group(const NcclOptions& options);

}  // namespace kiln::distributed
