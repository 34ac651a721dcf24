// The default process group of a data-parallel job, set up from the environment kiln launch
// (or torchrun) gives every rank:
//
//   kiln::distributed::init();                 // KILN_RANK, KILN_WORLD_SIZE, KILN_MASTER_ADDR/PORT
//   kiln::distributed::all_reduce(t);          // on the default group
//   if (kiln::distributed::rank() == 0) save(...);
//   kiln::distributed::destroy();              // or at exit
#pragma once

#include <memory>
#include <string>

#include "kiln/distributed/process_group.h"

namespace kiln::distributed {

struct InitOptions {
  // "gloo": CPU tensors over TCP. "nccl": CUDA tensors, one GPU per rank (KILN_LOCAL_RANK's).
  std::string backend = "gloo";
  int rank = -1;        // -1: KILN_RANK (or RANK)
  int world_size = -1;  // -1: KILN_WORLD_SIZE (or WORLD_SIZE)
  // "env://": rank 0 serves a TcpStore on KILN_MASTER_ADDR:KILN_MASTER_PORT (or MASTER_ADDR,
  // MASTER_PORT). "tcp://host:port": the same, explicit. "file:///path/dir": a FileStore in a
  // folder every rank sees; use a fresh folder per job.
  std::string rendezvous = "env://";
  // Rendezvous and collective deadline; KILN_DIST_TIMEOUT_MS overrides the default.
  Milliseconds timeout{std::chrono::minutes(10)};
};

// Creates the default group (once per process; destroy() first to create another).
void init(InitOptions options = {});
bool is_initialized();
// Waits for queued collectives, then closes the connections and the store.
void destroy();

// The default group; an error naming the fix when init() was not called.
ProcessGroup& default_group();
// 0 and 1 when not initialized, so that single-process code needs no branch.
int rank();
int world_size();
// This process's KILN_LOCAL_RANK (its index on this machine), 0 when unset.
int local_rank();

// The collectives of ProcessGroup on the default group.
Work all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, CollectiveOptions options = {});
Work broadcast(Tensor& tensor, int root = 0, CollectiveOptions options = {});
Work all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions options = {});
Work all_gather_into_tensor(Tensor& output, const Tensor& input, CollectiveOptions options = {});
Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::Sum,
                    CollectiveOptions options = {});
Work reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                           CollectiveOptions options = {});
Work barrier(CollectiveOptions options = {});

// A process group from explicit parts (tests, or a second group beside the default one).
std::unique_ptr<ProcessGroup> new_group(const std::string& backend, int rank, int world_size,
                                        std::shared_ptr<Store> store, Milliseconds timeout,
                                        const std::string& prefix = "default_pg");

}  // namespace kiln::distributed
