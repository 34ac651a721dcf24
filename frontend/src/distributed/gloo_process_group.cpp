// The Gloo process group: CPU tensors over TCP, with Gloo's ring all-reduce, broadcast,
// all-gather(v) and barrier. Gloo's calls block, so they run on the group's communication
// thread (CommThread) and the caller gets a Work handle.
//
// Failures are translated into kiln::Errors that name the operation and, when Gloo's
// message carries a peer address, the peer's rank: every rank publishes its TCP ports during
// the rendezvous, so "[127.0.0.1]:40213" reads as "rank 1".
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <regex>
#include <sstream>

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "distributed/rendezvous.h"
#include "distributed/stall_watch.h"
#include "distributed/work.h"
#include "kiln/error.h"
#include "kiln/half.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::distributed {
namespace {

// Gloo writes to sockets without MSG_NOSIGNAL: a peer that died would kill this process with
// SIGPIPE instead of letting the write fail. Ignored once, process-wide, as Gloo's own tests do.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

// Gloo's rendezvous interface over a kiln Store, with the group's deadline on every wait.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(kiln::distributed::Store& store, std::string prefix, Milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string v = store_.get(prefix_ + key, timeout_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    std::vector<std::string> missing = store_.wait(full, timeout);
    KILN_CHECK(missing.empty(), "kiln::distributed: the Gloo rendezvous waited ", timeout.count(), " ms for key '",
               missing.empty() ? "" : missing.front(), "' in ", store_.describe(), ". A rank stopped during the "
               "rendezvous. Fix: check the other ranks' output.");
  }

 private:
  kiln::distributed::Store& store_;
  std::string prefix_;
  Milliseconds timeout_;
};

// ---- reductions: c[i] = a[i] op b[i], per dtype ----
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <class T, class Compute, class Op>
void reduce_elements(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<T*>(c);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = T(Op{}(Compute(x[i]), Compute(y[i])));
}

struct Add {
  template <class V>
  V operator()(V a, V b) const { return a + b; }
};
struct Mul {
  template <class V>
  V operator()(V a, V b) const { return a * b; }
};
// NaN wins, as in PyTorch's max/min.
struct Max {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (std::is_floating_point_v<V>)
      if (a != a || b != b) return a != a ? a : b;
    return a < b ? b : a;
  }
};
struct Min {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (std::is_floating_point_v<V>)
      if (a != a || b != b) return a != a ? a : b;
    return b < a ? b : a;
  }
};
struct Or {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a | b) ? 1 : 0; }
};
struct And {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a && b) ? 1 : 0; }
};

template <class T, class Compute>
ReduceFn arithmetic_reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return &reduce_elements<T, Compute, Add>;
    case ReduceOp::Product: return &reduce_elements<T, Compute, Mul>;
    case ReduceOp::Max: return &reduce_elements<T, Compute, Max>;
    case ReduceOp::Min: return &reduce_elements<T, Compute, Min>;
  }
  return nullptr;
}

// bool: sum and max are "any", product and min are "all" (PyTorch's meaning).
ReduceFn reduction_for(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::Bool:
      return (op == ReduceOp::Sum || op == ReduceOp::Max) ? &reduce_elements<uint8_t, uint8_t, Or>
                                                          : &reduce_elements<uint8_t, uint8_t, And>;
    case DType::Int32: return arithmetic_reduction<int32_t, int32_t>(op);
    case DType::Int64: return arithmetic_reduction<int64_t, int64_t>(op);
    case DType::Float16: return arithmetic_reduction<Half, float>(op);
    case DType::BFloat16: return arithmetic_reduction<BFloat16, float>(op);
    case DType::Float32: return arithmetic_reduction<float, float>(op);
    case DType::Float64: return arithmetic_reduction<double, double>(op);
  }
  return nullptr;
}

// Avg is a sum divided by the group size afterwards (integers toward zero, like C++).
template <class T, class Compute>
void divide_elements(void* data, size_t n, int divisor) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = T(Compute(p[i]) / static_cast<Compute>(divisor));
}

void divide_in_place(DType dtype, void* data, size_t n, int divisor) {
  switch (dtype) {
    case DType::Int32: return divide_elements<int32_t, int32_t>(data, n, divisor);
    case DType::Int64: return divide_elements<int64_t, int64_t>(data, n, divisor);
    case DType::Float16: return divide_elements<Half, float>(data, n, divisor);
    case DType::BFloat16: return divide_elements<BFloat16, float>(data, n, divisor);
    case DType::Float32: return divide_elements<float, float>(data, n, divisor);
    case DType::Float64: return divide_elements<double, double>(data, n, divisor);
    case DType::Bool: break;
  }
}

// Gloo's typed setters only use sizeof(T): one pointer type per element size.
template <class Options>
void set_output_bytes(Options& o, void* ptr, size_t elements, size_t itemsize) {
  switch (itemsize) {
    case 1: o.setOutput(static_cast<uint8_t*>(ptr), elements); break;
    case 2: o.setOutput(static_cast<uint16_t*>(ptr), elements); break;
    case 4: o.setOutput(static_cast<uint32_t*>(ptr), elements); break;
    default: o.setOutput(static_cast<uint64_t*>(ptr), elements); break;
  }
}
template <class Options>
void set_input_bytes(Options& o, void* ptr, size_t elements, size_t itemsize) {
  switch (itemsize) {
    case 1: o.setInput(static_cast<uint8_t*>(ptr), elements); break;
    case 2: o.setInput(static_cast<uint16_t*>(ptr), elements); break;
    case 4: o.setInput(static_cast<uint32_t*>(ptr), elements); break;
    default: o.setInput(static_cast<uint64_t*>(ptr), elements); break;
  }
}

void check_tensor(const Tensor& t, const char* op, const char* what) {
  KILN_CHECK(t.defined(), "kiln::distributed::", op, ": ", what, " is undefined. Fix: pass a tensor.");
  KILN_CHECK(t.device().is_cpu(), "kiln::distributed::", op, ": ", what, " is on ", t.device().str(),
             " but the gloo backend moves CPU tensors. Fix: .to(kiln::kCPU) first, or use an nccl "
             "group for CUDA tensors.");
  KILN_CHECK(t.is_contiguous(), "kiln::distributed::", op, ": ", what, " (", t.type_str(), ") is not contiguous; "
             "collectives read and write it as one block. Fix: pass t.contiguous() (and copy the result back).");
}

class GlooProcessGroup final : public ProcessGroup {
 public:
  explicit GlooProcessGroup(const GlooOptions& o);
  ~GlooProcessGroup() override = default;
  std::string backend() const override { return "gloo"; }
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
  // Queues `body(tag, timeout)` on the communication thread under a new Work.
  Work enqueue(std::string description, CollectiveOptions options,
               std::function<void(uint32_t tag, Milliseconds timeout)> body);
  void run_all_reduce(void* data, size_t n, DType dtype, ReduceOp op, uint32_t tag, Milliseconds timeout);
  std::string explain_failure(const std::string& description, const std::string& gloo_message,
                              Milliseconds timeout) const;
  std::string peer_named_in(const std::string& gloo_message) const;
  void learn_peer_ports();

  std::shared_ptr<Store> store_;
  std::string prefix_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::map<int, int> rank_of_port_;  // a peer's TCP port -> its rank
  PeerProcesses peers_;              // the ranks on this machine, to name one whose process is gone
  uint64_t next_op_ = 0;  // issue order (caller's thread)
  std::mutex issue_mutex_;
  // Written only on the communication thread.
  std::exception_ptr broken_;
  std::unique_ptr<StallWatch> stall_watch_;
  // Last: its destructor runs what is queued while the members above still exist.
  CommThread thread_;
};

// The port of "[host]:port" (what Gloo's addresses print), or -1.
int port_in(const std::string& address) {
  static const std::regex kPort(R"(\]:(\d+))");
  std::smatch m;
  return std::regex_search(address, m, kPort) ? std::stoi(m[1].str()) : -1;
}

// The local ports of this process's established TCP connections (Linux: the socket inodes in
// /proc/self/fd, looked up in /proc/net/tcp and tcp6).
std::set<int> established_tcp_ports() {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state != "01" || !inodes.count(inode)) continue;  // 01: ESTABLISHED
      size_t colon = local.rfind(':');
      if (colon != std::string::npos) ports.insert(std::stoi(local.substr(colon + 1), nullptr, 16));
    }
  }
  return ports;
}

GlooProcessGroup::GlooProcessGroup(const GlooOptions& o)
    : ProcessGroup(o.rank, o.world_size, o.timeout), store_(o.store), prefix_(o.prefix) {
  ignore_sigpipe();
  // 1. Everyone announces itself and waits for the others, so a missing rank is named.
  wait_for_every_rank(*store_, prefix_, rank_, size_, timeout_);

  // 2. The TCP full mesh.
  gloo::transport::tcp::attr attr;
  if (!o.interface.empty()) {
    attr.iface = o.interface;
  } else {
    attr.hostname = o.hostname;  // empty: this host's name
  }
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context_->setTimeout(timeout_);
    GlooStore gloo_store(*store_, prefix_ + "/gloo/", timeout_);
    context_->connectFullMesh(gloo_store, device_);
  } catch (const kiln::Error&) {
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL("kiln::distributed::init: rank ", rank_, " of ", size_, " could not connect to the other ranks: ",
              e.what(), ". Fix: check that every rank can reach this host's address (set "
              "GlooOptions::interface or KILN_GLOO_INTERFACE, e.g. 'lo' on one machine).");
  }

  // 3. A rank leaving right after its connect would break its peers' connect (Gloo's mesh
  // returns before every peer finished); the first barrier makes init return together.
  barrier({}).wait();
  learn_peer_ports();
  stall_watch_ = std::make_unique<StallWatch>(*store_, prefix_, rank_, size_);
}

// Gloo's errors name the peer by "[ip]:port": its listening port, or the port of a connection
// it opened to this rank. Every rank publishes both kinds of its own ports; a port claimed by
// more than one rank (ranks that are threads of one process) names nobody.
void GlooProcessGroup::learn_peer_ports() {
  std::set<int> mine = established_tcp_ports();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !context_->getPair(r)) continue;
    int listening = port_in(context_->getPair(r)->address().str());
    if (listening > 0) mine.insert(listening);
    break;
  }
  std::string list;
  for (int port : mine) list += std::to_string(port) + ",";
  store_->set(prefix_ + "/ports/" + std::to_string(rank_), list);
  // Also the ranks' processes: a peer on this machine can then be checked for being alive.
  peers_ = PeerProcesses(*store_, prefix_, rank_, size_, timeout_);
  std::map<int, int> claims;  // port -> rank, or -1 when several ranks claim it
  for (int r = 0; r < size_; ++r) {
    std::istringstream ports(store_->get(prefix_ + "/ports/" + std::to_string(r), timeout_));
    for (std::string port; std::getline(ports, port, ',');) {
      auto [it, fresh] = claims.emplace(std::stoi(port), r);
      if (!fresh && it->second != r) it->second = -1;
    }
  }
  for (auto [port, r] : claims)
    if (r >= 0 && r != rank_) rank_of_port_[port] = r;
}

std::string GlooProcessGroup::peer_named_in(const std::string& message) const {
  static const std::regex kHostPort(R"(\[[^\]]*\]:(\d+))");
  for (std::sregex_iterator it(message.begin(), message.end(), kHostPort), end; it != end; ++it) {
    auto found = rank_of_port_.find(std::stoi((*it)[1].str()));
    if (found != rank_of_port_.end()) return "rank " + std::to_string(found->second);
  }
  // The port is not one a peer published: name the peers on this machine whose process is gone.
  return peers_.gone();
}

std::string GlooProcessGroup::explain_failure(const std::string& description, const std::string& gloo_message,
                                              Milliseconds timeout) const {
  std::string peer = peer_named_in(gloo_message);
  std::ostringstream os;
  os << "kiln::distributed: " << description << " failed on rank " << rank_ << " of " << size_ << " (gloo): ";
  bool timed_out = gloo_message.find("imed out") != std::string::npos ||
                   gloo_message.find("imeout") != std::string::npos;
  if (timed_out) {
    os << "nothing arrived from " << (peer.empty() ? "a peer" : peer) << " within " << timeout.count() << " ms";
    std::string peers = stall_watch_ ? stall_watch_->where_are_peers(description) : "";
    if (!peers.empty()) os << " (" << peers << ")";
    os << ". A rank is stuck, slower than the timeout, or the ranks called different collectives "
          "(or in a different order). Fix: look at the other ranks' output; make every rank issue the same "
          "collectives in the same order; raise the timeout if a rank legitimately works longer.";
  } else {
    os << (peer.empty() ? "a peer" : peer) << " closed its connection";
    // A peer whose own collective timed out closes its connections too: say where peers were
    // waiting, when they were.
    std::string peers = stall_watch_ ? stall_watch_->where_are_peers(description) : "";
    if (peers.find("waits in") != std::string::npos || peers.find("failed") != std::string::npos)
      os << " (" << peers << ")";
    os << ": that process exited, was killed, or gave up on a collective (its own output says why). "
          "Fix: look at that rank's output; kiln launch ends the other ranks when one fails.";
  }
  os << " [gloo: " << gloo_message << "]";
  return os.str();
}

Work GlooProcessGroup::enqueue(std::string description, CollectiveOptions options,
                               std::function<void(uint32_t, Milliseconds)> body) {
  auto state = std::make_shared<Work::State>();
  Milliseconds timeout = options.timeout.value_or(timeout_);
  // Numbered and queued under one lock, so that the queue's order is the numbers' order.
  std::unique_lock<std::mutex> lock(issue_mutex_);
  const uint32_t tag = static_cast<uint32_t>(next_op_++);
  // "all_reduce (sum, float32[10])" -> "all_reduce #12 (sum, float32[10])"
  size_t space = description.find(' ');
  state->description = description.substr(0, space) + " #" + std::to_string(tag) +
                       (space == std::string::npos ? "" : description.substr(space));
  thread_.post([this, state, tag, timeout, body = std::move(body)] {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->started = std::chrono::steady_clock::now();
    }
    if (broken_) {
      std::string first;
      try {
        std::rethrow_exception(broken_);
      } catch (const std::exception& e) {
        first = e.what();
      }
      state->finish(std::make_exception_ptr(kiln::Error(
          "kiln::distributed: " + state->description + " was not run: the process group broke earlier and "
          "cannot be used again. The first failure: " + first)));
      return;
    }
    if (stall_watch_) stall_watch_->started(state->description, timeout);
    try {
      body(tag, timeout);
      if (stall_watch_) stall_watch_->finished();
      state->finish(nullptr);
    } catch (const kiln::Error&) {
      if (stall_watch_) stall_watch_->failed();
      broken_ = std::current_exception();
      state->finish(broken_);
    } catch (const std::exception& e) {  // gloo::Exception, gloo::EnforceNotMet, ...
      if (stall_watch_) stall_watch_->failed();
      broken_ = std::make_exception_ptr(kiln::Error(explain_failure(state->description, e.what(), timeout)));
      state->finish(broken_);
    }
  });
  lock.unlock();
  Work work(state);
  if (!options.async_op) work.wait();
  return work;
}

void GlooProcessGroup::run_all_reduce(void* data, size_t n, DType dtype, ReduceOp op, uint32_t tag,
                                      Milliseconds timeout) {
  if (n == 0) return;
  gloo::AllreduceOptions o(context_);
  set_output_bytes(o, data, n, itemsize(dtype));
  o.setReduceFunction(reduction_for(dtype, op));
  o.setTag(tag);
  o.setTimeout(timeout);
  gloo::allreduce(o);
  if (op == ReduceOp::Avg) divide_in_place(dtype, data, n, size_);
}

std::string describe_op(const char* name, const Tensor& t, const char* extra = nullptr) {
  std::ostringstream os;
  os << name << " (";
  if (extra) os << extra << ", ";
  os << t.type_str() << ")";
  return os.str();
}

Work GlooProcessGroup::all_reduce(Tensor& tensor, ReduceOp op, CollectiveOptions options) {
  check_tensor(tensor, "all_reduce", "the tensor");
  KILN_CHECK(!(tensor.dtype() == DType::Bool && op == ReduceOp::Avg), "kiln::distributed::all_reduce: avg of a "
             "bool tensor has no meaning. Fix: use sum or max (any) or min (all), or convert it first.");
  Tensor t = tensor;
  void* data = t.numel() ? t.raw_data() : nullptr;
  t.bump_version();
  std::string what = describe_op("all_reduce", t, std::string(reduce_op_name(op)).c_str());
  return enqueue(what, options, [this, t, data, op](uint32_t tag, Milliseconds timeout) {
    run_all_reduce(data, static_cast<size_t>(t.numel()), t.dtype(), op, tag, timeout);
  });
}

Work GlooProcessGroup::broadcast(Tensor& tensor, int root, CollectiveOptions options) {
  check_tensor(tensor, "broadcast", "the tensor");
  KILN_CHECK(root >= 0 && root < size_, "kiln::distributed::broadcast: root ", root, " is not a rank of this group "
             "of ", size_, ". Fix: pass a root in [0, ", size_, ").");
  Tensor t = tensor;
  void* data = t.numel() ? t.raw_data() : nullptr;
  t.bump_version();
  std::string what = describe_op("broadcast", t, ("from rank " + std::to_string(root)).c_str());
  return enqueue(what, options, [this, t, data, root](uint32_t tag, Milliseconds timeout) {
    if (t.numel() == 0) return;
    gloo::BroadcastOptions o(context_);
    size_t n = static_cast<size_t>(t.numel());
    if (rank_ == root) set_input_bytes(o, data, n, t.element_size());
    set_output_bytes(o, data, n, t.element_size());
    o.setRoot(root);
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::broadcast(o);
  });
}

Work GlooProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input, CollectiveOptions options) {
  check_tensor(input, "all_gather_into_tensor", "the input");
  check_tensor(output, "all_gather_into_tensor", "the output");
  KILN_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * size_,
             "kiln::distributed::all_gather_into_tensor: the output must hold ", size_, " inputs of ",
             input.type_str(), " (", input.numel() * size_, " ", dtype_name(input.dtype()), " elements) but it is ",
             output.type_str(), ". Fix: allocate the output as [world_size * n, ...] of the input's dtype.");
  Tensor in = input, out = output;
  void* in_data = in.numel() ? in.raw_data() : nullptr;
  void* out_data = out.numel() ? out.raw_data() : nullptr;
  out.bump_version();
  return enqueue(describe_op("all_gather", in), options,
                 [this, in, out, in_data, out_data](uint32_t tag, Milliseconds timeout) {
                   if (in.numel() == 0) return;
                   gloo::AllgatherOptions o(context_);
                   size_t n = static_cast<size_t>(in.numel());
                   set_input_bytes(o, in_data, n, in.element_size());
                   set_output_bytes(o, out_data, n * size_, in.element_size());
                   o.setTag(tag);
                   o.setTimeout(timeout);
                   gloo::allgather(o);
                 });
}

Work GlooProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions options) {
  check_tensor(input, "all_gather", "the input");
  KILN_CHECK(static_cast<int>(outputs.size()) == size_, "kiln::distributed::all_gather: expected one output "
             "tensor per rank (", size_, ") but got ", outputs.size(), ". Fix: pass world_size tensors.");
  std::vector<size_t> counts;
  for (int r = 0; r < size_; ++r) {
    check_tensor(outputs[r], "all_gather", ("output " + std::to_string(r)).c_str());
    KILN_CHECK(outputs[r].dtype() == input.dtype(), "kiln::distributed::all_gather: output ", r, " is ",
               outputs[r].type_str(), " but the input is ", input.type_str(), ". Fix: use the input's dtype.");
    counts.push_back(static_cast<size_t>(outputs[r].numel()));
  }
  KILN_CHECK(counts[rank_] == static_cast<size_t>(input.numel()), "kiln::distributed::all_gather: output ", rank_,
             " (this rank's) is ", outputs[rank_].type_str(), " but the input is ", input.type_str(),
             ". Fix: outputs[r] must have rank r's input shape.");
  Tensor in = input;
  std::vector<Tensor> outs = outputs;
  for (Tensor& o : outs) o.bump_version();
  return enqueue(describe_op("all_gather", in), options, [this, in, outs, counts](uint32_t tag, Milliseconds timeout) {
    size_t total = 0;
    for (size_t c : counts) total += c;
    if (total == 0) return;
    size_t item = in.element_size();
    std::vector<uint8_t> gathered(total * item);
    gloo::AllgathervOptions o(context_);
    switch (item) {
      case 1: o.setInput(static_cast<uint8_t*>(in.raw_data()), counts[rank_]);
              o.setOutput(reinterpret_cast<uint8_t*>(gathered.data()), counts); break;
      case 2: o.setInput(static_cast<uint16_t*>(in.raw_data()), counts[rank_]);
              o.setOutput(reinterpret_cast<uint16_t*>(gathered.data()), counts); break;
      case 4: o.setInput(static_cast<uint32_t*>(in.raw_data()), counts[rank_]);
              o.setOutput(reinterpret_cast<uint32_t*>(gathered.data()), counts); break;
      default: o.setInput(static_cast<uint64_t*>(in.raw_data()), counts[rank_]);
               o.setOutput(reinterpret_cast<uint64_t*>(gathered.data()), counts); break;
    }
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::allgatherv(o);
    size_t offset = 0;
    for (size_t r = 0; r < outs.size(); ++r) {
      if (counts[r]) std::memcpy(outs[r].raw_data(), gathered.data() + offset, counts[r] * item);
      offset += counts[r] * item;
    }
  });
}

// Reduce-scatter as an all-reduce of the concatenated inputs, each rank keeping its part:
// any dtype, op and uneven split; it moves about twice the bytes of a dedicated
// reduce-scatter (docs/distributed.md says where that matters).
Work GlooProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                      CollectiveOptions options) {
  check_tensor(output, "reduce_scatter", "the output");
  KILN_CHECK(static_cast<int>(inputs.size()) == size_, "kiln::distributed::reduce_scatter: expected one input per "
             "rank (", size_, ") but got ", inputs.size(), ". Fix: pass world_size tensors.");
  KILN_CHECK(!(output.dtype() == DType::Bool && op == ReduceOp::Avg), "kiln::distributed::reduce_scatter: avg of a "
             "bool tensor has no meaning. Fix: use sum, max or min.");
  std::vector<size_t> counts;
  size_t total = 0;
  for (int r = 0; r < size_; ++r) {
    check_tensor(inputs[r], "reduce_scatter", ("input " + std::to_string(r)).c_str());
    KILN_CHECK(inputs[r].dtype() == output.dtype(), "kiln::distributed::reduce_scatter: input ", r, " is ",
               inputs[r].type_str(), " but the output is ", output.type_str(), ". Fix: use one dtype.");
    counts.push_back(static_cast<size_t>(inputs[r].numel()));
    total += counts.back();
  }
  KILN_CHECK(counts[rank_] == static_cast<size_t>(output.numel()), "kiln::distributed::reduce_scatter: input ",
             rank_, " (this rank's part) is ", inputs[rank_].type_str(), " but the output is ", output.type_str(),
             ". Fix: inputs[r] must have rank r's output shape.");
  size_t item = output.element_size();
  auto flat = std::make_shared<std::vector<uint8_t>>(total * item);
  size_t offset = 0;
  for (const Tensor& in : inputs) {  // copied now: the caller may reuse its inputs at once
    if (in.numel()) std::memcpy(flat->data() + offset, in.raw_data(), in.nbytes());
    offset += in.nbytes();
  }
  size_t mine = 0;
  for (int r = 0; r < rank_; ++r) mine += counts[r] * item;
  Tensor out = output;
  out.bump_version();
  return enqueue(describe_op("reduce_scatter", out, std::string(reduce_op_name(op)).c_str()), options,
                 [this, out, flat, mine, total, op](uint32_t tag, Milliseconds timeout) {
                   run_all_reduce(flat->data(), total, out.dtype(), op, tag, timeout);
                   if (out.numel()) std::memcpy(out.raw_data(), flat->data() + mine, out.nbytes());
                 });
}

Work GlooProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op,
                                             CollectiveOptions options) {
  check_tensor(input, "reduce_scatter_tensor", "the input");
  KILN_CHECK(input.dim() >= 1 && input.size(0) % size_ == 0 && output.numel() * size_ == input.numel(),
             "kiln::distributed::reduce_scatter_tensor: the input must be [world_size * n, ...] and the output "
             "[n, ...]; got input ", input.type_str(), " and output ", output.defined() ? output.type_str() : "undefined",
             " for a group of ", size_, ". Fix: use reduce_scatter() with a list of inputs for uneven parts.");
  std::vector<Tensor> parts;
  int64_t rows = input.size(0) / size_;
  for (int r = 0; r < size_; ++r) parts.push_back(input.narrow(0, r * rows, rows));
  return reduce_scatter(output, parts, op, options);
}

Work GlooProcessGroup::barrier(CollectiveOptions options) {
  return enqueue("barrier", options, [this](uint32_t tag, Milliseconds timeout) {
    gloo::BarrierOptions o(context_);
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::barrier(o);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const GlooOptions& options) {
  KILN_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
             "kiln::distributed::init: rank ", options.rank, " is not in [0, world_size = ", options.world_size,
             "). Fix: set KILN_RANK in [0, KILN_WORLD_SIZE) on every process (kiln launch does).");
  KILN_CHECK(options.store, "kiln::distributed::init: no rendezvous store. Fix: pass a TcpStore or FileStore.");
  return std::make_unique<GlooProcessGroup>(options);
}

}  // namespace kiln::distributed
