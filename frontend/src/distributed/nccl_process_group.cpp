// The NCCL process group: CUDA tensors, with NCCL's all-reduce, broadcast, reduce,
// all-gather and reduce-scatter on the group's own CUDA stream.
//
// NCCL's calls only queue work on a stream and return, so a collective is issued on the
// caller's thread, after the NCCL stream was made to wait for the caller's current stream
// (whose kernels wrote the inputs). An event recorded after it marks its end. A watchdog
// thread (PyTorch's design) completes the Work handles as their events pass, in issue order,
// and is what enforces the timeouts: a collective still on the GPU after its deadline, or an
// error NCCL reports asynchronously (a peer died), aborts the communicator, which frees the
// GPU of the hung kernels, and fails every collective in flight with a kiln::Error naming
// the operation and where the peers are (StallWatch).
//
// The tensors of a collective are kept alive until its event passed, so kiln's device
// allocator cannot hand their memory to new tensors while NCCL still reads or writes it.
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "distributed/rendezvous.h"
#include "distributed/stall_watch.h"
#include "distributed/work.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/nccl.h"
#include "kiln/cuda/stream.h"
#include "kiln/error.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::distributed {
namespace {

namespace nccl = kiln::cuda::nccl;
using Clock = std::chrono::steady_clock;

int nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return nccl::kUint8;
    case DType::Int32: return nccl::kInt32;
    case DType::Int64: return nccl::kInt64;
    case DType::Float16: return nccl::kFloat16;
    case DType::BFloat16: return nccl::kBfloat16;
    case DType::Float32: return nccl::kFloat32;
    case DType::Float64: return nccl::kFloat64;
  }
  return nccl::kUint8;
}

// bool: sum and max are "any", product and min are "all" (PyTorch's meaning), as bytes.
int nccl_op(DType dtype, ReduceOp op) {
  if (dtype == DType::Bool) return (op == ReduceOp::Sum || op == ReduceOp::Max) ? nccl::kMax : nccl::kMin;
  switch (op) {
    case ReduceOp::Sum: return nccl::kSum;
    case ReduceOp::Avg: return nccl::kAvg;
    case ReduceOp::Max: return nccl::kMax;
    case ReduceOp::Min: return nccl::kMin;
    case ReduceOp::Product: return nccl::kProd;
  }
  return nccl::kSum;
}

std::string describe_op(const char* name, const Tensor& t, const std::string& extra = "") {
  std::ostringstream os;
  os << name << " (";
  if (!extra.empty()) os << extra << ", ";
  os << t.type_str() << ")";
  return os.str();
}

// The GPU of a rank: its index on this machine over the GPUs there (torchrun's convention).
int default_device() {
  const char* local = std::getenv("KILN_LOCAL_RANK");
  if (!local || !*local) local = std::getenv("LOCAL_RANK");
  const int count = cuda::device_count();
  KILN_CHECK(count > 0, "kiln::distributed::init: the nccl backend needs a GPU, but none is usable here: ",
             cuda::unavailable_reason(), " Fix: run on a machine with an NVIDIA GPU, or use the gloo backend "
             "with CPU tensors.");
  return (local && *local ? std::atoi(local) : 0) % count;
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  explicit NcclProcessGroup(const NcclOptions& o);
  ~NcclProcessGroup() override;
  std::string backend() const override { return "nccl"; }
  Store& store() override { return *store_; }

  Work all_reduce(Tensor& tensor, ReduceOp op, CollectiveOptions options) override;
  Work broadcast(Tensor& tensor, int root, CollectiveOptions options) override;
  Work all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions options) override;
  Work all_gather_into_tensor(Tensor& output, const Tensor& input, CollectiveOptions options) override;
  Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                      CollectiveOptions options) override;
  Work reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op, CollectiveOptions options) override;
  Work barrier(CollectiveOptions options) override;

 private:
  // One collective between its issue and the GPU's end of it.
  struct InFlight {
    std::shared_ptr<Work::State> state;
    Milliseconds timeout{0};
    Clock::time_point deadline;
    cuda::Event done;
    bool issued = false;          // on the stream, with `done` recorded after it
    std::vector<Tensor> tensors;  // alive until `done` passed
  };

  // Issues `issue(stream)` under a new Work, after the caller's current stream.
  Work launch(std::string description, std::vector<Tensor> tensors, CollectiveOptions options,
              const std::function<nccl::Result(nccl::Stream)>& issue);
  void check_tensor(const Tensor& t, const char* op, const std::string& what) const;
  void watch();
  // Aborts the communicator and fails every collective in flight; `culprit` gets `message`,
  // the others a note that the group broke. Called with mutex_ held.
  void break_group(const InFlight* culprit, const std::string& message);
  std::string nccl_failure(const std::string& description, nccl::Result result) const;
  // "; the process of rank 1 has ended" when a peer on this machine is gone, else "".
  std::string ended_peers() const;

  const nccl::Api& api_;
  int device_;
  std::shared_ptr<Store> store_;
  std::string prefix_;
  nccl::Comm comm_ = nullptr;
  cuda::Stream stream_ = cuda::Stream::default_stream();  // its own, made once the GPU is known
  Tensor barrier_flag_;
  std::mutex issue_mutex_;  // one collective issued at a time, numbered in issue order
  uint64_t next_op_ = 0;
  std::mutex mutex_;  // guards what follows
  std::condition_variable cv_;
  std::deque<std::shared_ptr<InFlight>> in_flight_;
  const InFlight* watched_ = nullptr;  // the head StallWatch was told about
  std::string broken_;                 // the first failure; empty while healthy
  bool aborted_ = false;
  bool stopping_ = false;
  PeerProcesses peers_;
  std::unique_ptr<StallWatch> stall_watch_;
  std::thread watchdog_;
};

const nccl::Api& require_nccl() {
  KILN_CHECK(nccl::available(), "kiln::distributed::init: the nccl backend cannot start: ",
             nccl::unavailable_reason());
  return *nccl::loaded().api;
}

NcclProcessGroup::NcclProcessGroup(const NcclOptions& o)
    : ProcessGroup(o.rank, o.world_size, o.timeout),
      api_(require_nccl()),
      device_(o.device >= 0 ? o.device : default_device()),
      store_(o.store),
      prefix_(o.prefix) {
  nccl::bind_device(device_);
  wait_for_every_rank(*store_, prefix_, rank_, size_, timeout_);
  peers_ = PeerProcesses(*store_, prefix_, rank_, size_, timeout_);

  // Rank 0's unique id, through the store, names the communicator every rank joins.
  nccl::UniqueId id{};
  const std::string id_key = prefix_ + "/nccl/unique_id";
  if (rank_ == 0) {
    nccl::Result r = api_.ncclGetUniqueId(&id);
    KILN_CHECK(r == nccl::kSuccess, "kiln::distributed::init: ncclGetUniqueId failed on rank 0: ",
               nccl::result_name(r), ". Fix: run with NCCL_DEBUG=WARN to see NCCL's reason.");
    store_->set(id_key, std::string(id.internal, sizeof(id.internal)));
  } else {
    std::string bytes = store_->get(id_key, timeout_);
    KILN_CHECK(bytes.size() == sizeof(id.internal), "kiln::distributed::init: rank 0 published a ", bytes.size(),
               "-byte NCCL id, expected ", sizeof(id.internal), ". Fix: run the same kiln on every rank.");
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }

  // ncclCommInitRank blocks until every rank called it, and cannot be aborted: it runs on a
  // thread of its own, and a rank that dies meanwhile leaves it behind at the deadline.
  struct Init {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    nccl::Comm comm = nullptr;
    nccl::Result result = nccl::kSuccess;
  };
  auto init = std::make_shared<Init>();
  std::thread([init, id, device = device_, size = size_, rank = rank_, &api = api_] {
    nccl::Comm comm = nullptr;
    nccl::Result r = nccl::kSuccess;
    try {
      nccl::bind_device(device);
      r = api.ncclCommInitRank(&comm, size, id, rank);
    } catch (const std::exception&) {
      r = 1;  // ncclUnhandledCudaError: the device could not be made current
    }
    std::lock_guard<std::mutex> lock(init->mutex);
    init->comm = comm;
    init->result = r;
    init->done = true;
    init->cv.notify_all();
  }).detach();
  {
    std::unique_lock<std::mutex> lock(init->mutex);
    bool done = init->cv.wait_for(lock, timeout_, [&] { return init->done; });
    KILN_CHECK(done, "kiln::distributed::init: rank ", rank_, " of ", size_, " waited ", timeout_.count(),
               " ms in ncclCommInitRank on cuda:", device_, ": a rank stopped or is stuck after the rendezvous. "
               "Fix: look at the other ranks' output (NCCL_DEBUG=WARN shows NCCL's side).");
    KILN_CHECK(init->result == nccl::kSuccess, "kiln::distributed::init: ncclCommInitRank failed on rank ", rank_,
               " of ", size_, " (cuda:", device_, "): ", nccl::result_name(init->result), " (",
               api_.ncclGetLastError(nullptr), "). Fix: each rank needs a GPU of its own (NCCL refuses two ranks "
               "on one GPU); NCCL_DEBUG=WARN shows NCCL's reason.");
    comm_ = init->comm;
  }
  stream_ = cuda::Stream::create(device_);
  barrier_flag_ = zeros({1}, TensorOptions(DType::Int32).with_device(cuda::device(static_cast<int16_t>(device_))));
  stall_watch_ = std::make_unique<StallWatch>(*store_, prefix_, rank_, size_);
  watchdog_ = std::thread([this] { watch(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  watchdog_.join();  // returns once every collective in flight finished or failed
  if (comm_ && !aborted_) api_.ncclCommDestroy(comm_);
}

void NcclProcessGroup::check_tensor(const Tensor& t, const char* op, const std::string& what) const {
  KILN_CHECK(t.defined(), "kiln::distributed::", op, ": ", what, " is undefined. Fix: pass a tensor.");
  KILN_CHECK(t.device() == cuda::device(static_cast<int16_t>(device_)), "kiln::distributed::", op, ": ", what,
             " is on ", t.device().str(), " but this rank's nccl group moves tensors of cuda:", device_,
             ". Fix: .to(kiln::cuda::device(", device_, ")) first (or use a gloo group for CPU tensors).");
  KILN_CHECK(t.is_contiguous(), "kiln::distributed::", op, ": ", what, " (", t.type_str(), ") is not contiguous; "
             "collectives read and write it as one block. Fix: pass t.contiguous() (and copy the result back).");
}

std::string NcclProcessGroup::ended_peers() const {
  std::string gone = peers_.gone();
  if (gone.empty()) return "";
  const bool several = gone.find(',') != std::string::npos;
  return std::string("; the process") + (several ? "es of " : " of ") + gone + (several ? " have" : " has") + " ended";
}

std::string NcclProcessGroup::nccl_failure(const std::string& description, nccl::Result result) const {
  std::ostringstream os;
  os << "kiln::distributed: " << description << " failed on rank " << rank_ << " of " << size_ << " (nccl, cuda:"
     << device_ << "): " << nccl::result_name(result);
  const char* last = api_.ncclGetLastError(comm_);
  if (last && *last) os << " (" << last << ")";
  os << ended_peers();
  std::string peers = stall_watch_ ? stall_watch_->where_are_peers(description) : "";
  if (!peers.empty()) os << " [" << peers << "]";
  os << ". A peer exited or failed, or the ranks called different collectives. Fix: look at the other ranks' "
        "output (kiln launch ends them when one fails); NCCL_DEBUG=WARN shows NCCL's side.";
  return os.str();
}

Work NcclProcessGroup::launch(std::string description, std::vector<Tensor> tensors, CollectiveOptions options,
                              const std::function<nccl::Result(nccl::Stream)>& issue) {
  auto flight = std::make_shared<InFlight>();
  flight->state = std::make_shared<Work::State>();
  flight->timeout = options.timeout.value_or(timeout_);
  flight->tensors = std::move(tensors);
  std::unique_lock<std::mutex> issuing(issue_mutex_);
  // "all_reduce (sum, float32[10])" -> "all_reduce #12 (sum, float32[10])"
  size_t space = description.find(' ');
  flight->state->description = description.substr(0, space) + " #" + std::to_string(next_op_++) +
                               (space == std::string::npos ? "" : description.substr(space));
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    flight->state->started = Clock::now();
    flight->deadline = flight->state->started + flight->timeout;
    if (!broken_.empty()) {
      flight->state->finish(std::make_exception_ptr(kiln::Error(
          "kiln::distributed: " + flight->state->description + " was not run: the process group broke earlier "
          "and cannot be used again. The first failure: " + broken_)));
    } else {
      in_flight_.push_back(flight);
      queued = true;
    }
  }
  cv_.notify_all();
  if (queued) {
    std::string failure;
    try {
      nccl::bind_device(device_);
      cuda::Event inputs_ready;
      inputs_ready.record(cuda::current_stream(device_));
      inputs_ready.block(stream_);
      nccl::Result r = issue(static_cast<nccl::Stream>(stream_.handle()));
      if (r == nccl::kSuccess || r == nccl::kInProgress) {
        flight->done.record(stream_);
      } else {
        failure = nccl_failure(flight->state->description, r);
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure.empty())
        flight->issued = true;
      else if (std::find(in_flight_.begin(), in_flight_.end(), flight) != in_flight_.end())
        break_group(flight.get(), failure);  // else the watchdog failed it already (a timeout)
    }
    cv_.notify_all();
  }
  issuing.unlock();
  Work work(flight->state);
  if (!options.async_op) work.wait();
  return work;
}

void NcclProcessGroup::break_group(const InFlight* culprit, const std::string& message) {
  if (broken_.empty()) broken_ = message;
  if (!aborted_ && comm_) {
    api_.ncclCommAbort(comm_);  // frees the GPU of kernels waiting for peers
    aborted_ = true;
  }
  if (stall_watch_ && !in_flight_.empty()) stall_watch_->failed();
  for (const auto& f : in_flight_) {
    std::string why = f.get() == culprit ? message
                                          : "kiln::distributed: " + f->state->description + " did not finish: the "
                                            "process group broke. The first failure: " + broken_;
    f->state->finish(std::make_exception_ptr(kiln::Error(why)));
  }
  in_flight_.clear();
  watched_ = nullptr;
}

void NcclProcessGroup::watch() {
  // The end of a collective is seen by polling its event, so the poll interval is latency a
  // waiting caller pays: it starts at 1 us after each issue or completion and backs off to
  // 20 us, and this thread's timer slack (Linux rounds sleeps up by 50 us by default) is 1 us.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  std::chrono::microseconds interval(1);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (in_flight_.empty()) {
      if (stopping_) return;
      cv_.wait(lock);
      interval = std::chrono::microseconds(1);
      continue;
    }
    std::shared_ptr<InFlight> head = in_flight_.front();
    if (watched_ != head.get()) {
      stall_watch_->started(head->state->description, head->timeout);
      watched_ = head.get();
    }
    std::string failure;
    try {
      if (head->issued && head->done.query()) {
        in_flight_.pop_front();
        stall_watch_->finished();
        watched_ = nullptr;
        head->state->finish(nullptr);
        interval = std::chrono::microseconds(1);
        continue;
      }
      nccl::Result async = nccl::kSuccess;
      api_.ncclCommGetAsyncError(comm_, &async);
      if (async != nccl::kSuccess && async != nccl::kInProgress)
        failure = nccl_failure(head->state->description, async);
    } catch (const std::exception& e) {  // the driver failed the event: an earlier kernel faulted
      failure = "kiln::distributed: " + head->state->description + " failed: " + e.what();
    }
    if (failure.empty() && Clock::now() > head->deadline) {
      std::ostringstream os;
      os << "kiln::distributed: " << head->state->description << " did not finish on rank " << rank_ << " of "
         << size_ << " (nccl, cuda:" << device_ << ") within " << head->timeout.count() << " ms";
      std::string peers = stall_watch_->where_are_peers(head->state->description);
      if (!peers.empty()) os << " (" << peers << ")";
      os << ended_peers();
      os << ". A rank is stuck, slower than the timeout, or the ranks called different collectives (or in a "
            "different order); the communicator was aborted. Fix: look at the other ranks' output; make every rank "
            "issue the same collectives in the same order; raise the timeout if a rank legitimately works longer.";
      failure = os.str();
    }
    if (!failure.empty()) {
      break_group(head.get(), failure);
      continue;
    }
    // A new collective's notify wakes this early, restarting the back-off.
    if (cv_.wait_for(lock, interval) == std::cv_status::no_timeout) {
      interval = std::chrono::microseconds(1);
    } else {
      interval = std::min(interval * 2, std::chrono::microseconds(20));
    }
  }
}

Work NcclProcessGroup::all_reduce(Tensor& tensor, ReduceOp op, CollectiveOptions options) {
  check_tensor(tensor, "all_reduce", "the tensor");
  KILN_CHECK(!(tensor.dtype() == DType::Bool && op == ReduceOp::Avg), "kiln::distributed::all_reduce: avg of a "
             "bool tensor has no meaning. Fix: use sum or max (any) or min (all), or convert it first.");
  void* data = tensor.numel() ? tensor.raw_data() : nullptr;
  const size_t n = static_cast<size_t>(tensor.numel());
  const int type = nccl_type(tensor.dtype()), reduce = nccl_op(tensor.dtype(), op);
  tensor.bump_version();
  return launch(describe_op("all_reduce", tensor, std::string(reduce_op_name(op))), {tensor}, options,
                [=, this](nccl::Stream s) {
                  return n ? api_.ncclAllReduce(data, data, n, type, reduce, comm_, s) : nccl::kSuccess;
                });
}

Work NcclProcessGroup::broadcast(Tensor& tensor, int root, CollectiveOptions options) {
  check_tensor(tensor, "broadcast", "the tensor");
  KILN_CHECK(root >= 0 && root < size_, "kiln::distributed::broadcast: root ", root, " is not a rank of this group "
             "of ", size_, ". Fix: pass a root in [0, ", size_, ").");
  void* data = tensor.numel() ? tensor.raw_data() : nullptr;
  const size_t bytes = tensor.nbytes();
  tensor.bump_version();
  return launch(describe_op("broadcast", tensor, "from rank " + std::to_string(root)), {tensor}, options,
                [=, this](nccl::Stream s) {
                  return bytes ? api_.ncclBroadcast(data, data, bytes, nccl::kUint8, root, comm_, s) : nccl::kSuccess;
                });
}

Work NcclProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input, CollectiveOptions options) {
  check_tensor(input, "all_gather_into_tensor", "the input");
  check_tensor(output, "all_gather_into_tensor", "the output");
  KILN_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * size_,
             "kiln::distributed::all_gather_into_tensor: the output must hold ", size_, " inputs of ",
             input.type_str(), " (", input.numel() * size_, " ", dtype_name(input.dtype()), " elements) but it is ",
             output.type_str(), ". Fix: allocate the output as [world_size * n, ...] of the input's dtype.");
  const void* in = input.numel() ? input.raw_data() : nullptr;
  void* out = output.numel() ? output.raw_data() : nullptr;
  const size_t bytes = input.nbytes();
  output.bump_version();
  return launch(describe_op("all_gather", input), {input, output}, options, [=, this](nccl::Stream s) {
    return bytes ? api_.ncclAllGather(in, out, bytes, nccl::kUint8, comm_, s) : nccl::kSuccess;
  });
}

// Uneven parts: one broadcast per rank, grouped so that NCCL runs them as one operation.
Work NcclProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions options) {
  check_tensor(input, "all_gather", "the input");
  KILN_CHECK(static_cast<int>(outputs.size()) == size_, "kiln::distributed::all_gather: expected one output "
             "tensor per rank (", size_, ") but got ", outputs.size(), ". Fix: pass world_size tensors.");
  std::vector<Tensor> kept{input};
  for (int r = 0; r < size_; ++r) {
    check_tensor(outputs[r], "all_gather", "output " + std::to_string(r));
    KILN_CHECK(outputs[r].dtype() == input.dtype(), "kiln::distributed::all_gather: output ", r, " is ",
               outputs[r].type_str(), " but the input is ", input.type_str(), ". Fix: use the input's dtype.");
    outputs[r].bump_version();
    kept.push_back(outputs[r]);
  }
  KILN_CHECK(outputs[rank_].numel() == input.numel(), "kiln::distributed::all_gather: output ", rank_,
             " (this rank's) is ", outputs[rank_].type_str(), " but the input is ", input.type_str(),
             ". Fix: outputs[r] must have rank r's input shape.");
  return launch(describe_op("all_gather", input), kept, options, [kept, this](nccl::Stream s) {
    nccl::Result r = api_.ncclGroupStart();
    for (int root = 0; root < size_ && r == nccl::kSuccess; ++root) {
      const Tensor& out = kept[1 + root];
      if (out.nbytes() == 0) continue;
      const void* send = root == rank_ ? kept[0].raw_data() : out.raw_data();
      r = api_.ncclBroadcast(send, out.raw_data(), out.nbytes(), nccl::kUint8, root, comm_, s);
    }
    nccl::Result end = api_.ncclGroupEnd();
    return r != nccl::kSuccess ? r : end;
  });
}

// One reduce per rank (to that rank), grouped: any split, even or not, in one operation.
Work NcclProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                      CollectiveOptions options) {
  check_tensor(output, "reduce_scatter", "the output");
  KILN_CHECK(static_cast<int>(inputs.size()) == size_, "kiln::distributed::reduce_scatter: expected one input per "
             "rank (", size_, ") but got ", inputs.size(), ". Fix: pass world_size tensors.");
  KILN_CHECK(!(output.dtype() == DType::Bool && op == ReduceOp::Avg), "kiln::distributed::reduce_scatter: avg of a "
             "bool tensor has no meaning. Fix: use sum, max or min.");
  std::vector<Tensor> kept{output};
  for (int r = 0; r < size_; ++r) {
    check_tensor(inputs[r], "reduce_scatter", "input " + std::to_string(r));
    KILN_CHECK(inputs[r].dtype() == output.dtype(), "kiln::distributed::reduce_scatter: input ", r, " is ",
               inputs[r].type_str(), " but the output is ", output.type_str(), ". Fix: use one dtype.");
    kept.push_back(inputs[r]);
  }
  KILN_CHECK(inputs[rank_].numel() == output.numel(), "kiln::distributed::reduce_scatter: input ", rank_,
             " (this rank's part) is ", inputs[rank_].type_str(), " but the output is ", output.type_str(),
             ". Fix: inputs[r] must have rank r's output shape.");
  output.bump_version();
  const int type = nccl_type(output.dtype()), reduce = nccl_op(output.dtype(), op);
  return launch(describe_op("reduce_scatter", output, std::string(reduce_op_name(op))), kept, options,
                [kept, type, reduce, this](nccl::Stream s) {
                  nccl::Result r = api_.ncclGroupStart();
                  for (int root = 0; root < size_ && r == nccl::kSuccess; ++root) {
                    const Tensor& in = kept[1 + root];
                    if (in.numel() == 0) continue;
                    // Only the root's receive buffer is written.
                    void* recv = root == rank_ ? kept[0].raw_data() : in.raw_data();
                    r = api_.ncclReduce(in.raw_data(), recv, static_cast<size_t>(in.numel()), type, reduce, root,
                                        comm_, s);
                  }
                  nccl::Result end = api_.ncclGroupEnd();
                  return r != nccl::kSuccess ? r : end;
                });
}

Work NcclProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op,
                                             CollectiveOptions options) {
  check_tensor(input, "reduce_scatter_tensor", "the input");
  check_tensor(output, "reduce_scatter_tensor", "the output");
  KILN_CHECK(input.dim() >= 1 && input.size(0) % size_ == 0 && output.numel() * size_ == input.numel() &&
                 output.dtype() == input.dtype(),
             "kiln::distributed::reduce_scatter_tensor: the input must be [world_size * n, ...] and the output "
             "[n, ...] of one dtype; got input ", input.type_str(), " and output ", output.type_str(),
             " for a group of ", size_, ". Fix: use reduce_scatter() with a list of inputs for uneven parts.");
  KILN_CHECK(!(output.dtype() == DType::Bool && op == ReduceOp::Avg), "kiln::distributed::reduce_scatter_tensor: "
             "avg of a bool tensor has no meaning. Fix: use sum, max or min.");
  const void* in = input.numel() ? input.raw_data() : nullptr;
  void* out = output.numel() ? output.raw_data() : nullptr;
  const size_t n = static_cast<size_t>(output.numel());
  const int type = nccl_type(output.dtype()), reduce = nccl_op(output.dtype(), op);
  output.bump_version();
  return launch(describe_op("reduce_scatter", output, std::string(reduce_op_name(op))), {input, output}, options,
                [=, this](nccl::Stream s) {
                  return n ? api_.ncclReduceScatter(in, out, n, type, reduce, comm_, s) : nccl::kSuccess;
                });
}

// A one-element all-reduce; wait() returns once every rank's GPU got there.
Work NcclProcessGroup::barrier(CollectiveOptions options) {
  void* flag = barrier_flag_.raw_data();
  return launch("barrier", {barrier_flag_}, options, [flag, this](nccl::Stream s) {
    return api_.ncclAllReduce(flag, flag, 1, nccl::kInt32, nccl::kSum, comm_, s);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(const NcclOptions& options) {
  KILN_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
             "kiln::distributed::init: rank ", options.rank, " is not in [0, world_size = ", options.world_size,
             "). Fix: set KILN_RANK in [0, KILN_WORLD_SIZE) on every process (kiln launch does).");
  KILN_CHECK(options.store, "kiln::distributed::init: no rendezvous store. Fix: pass a TcpStore or FileStore.");
  return std::make_unique<NcclProcessGroup>(options);
}

}  // namespace kiln::distributed
