// The default process group: rendezvous from the environment (kiln launch, torchrun) or an
// explicit tcp:// or file:// address.
#include "kiln/distributed/init.h"

#include <cstdlib>
#include <mutex>

#include "kiln/error.h"

namespace kiln::distributed {
namespace {

std::mutex group_mutex;
std::unique_ptr<ProcessGroup> the_group;

// The first of `names` that is set in the environment, or "".
std::string env_first(std::initializer_list<const char*> names, const char** which = nullptr) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v && *v) {
      if (which) *which = name;
      return v;
    }
  }
  return "";
}

int env_int(std::initializer_list<const char*> names, const char* what) {
  const char* which = nullptr;
  std::string v = env_first(names, &which);
  KILN_CHECK(!v.empty(), "kiln::distributed::init: the ", what, " is not set: expected ", *names.begin(),
             " in the environment. Fix: start the program with kiln launch --nproc N (it sets KILN_RANK, "
             "KILN_WORLD_SIZE, KILN_MASTER_ADDR and KILN_MASTER_PORT), or pass InitOptions{.rank, .world_size}.");
  char* end = nullptr;
  long parsed = std::strtol(v.c_str(), &end, 10);
  KILN_CHECK(end && *end == '\0' && parsed >= 0 && parsed < (1 << 24), "kiln::distributed::init: ", which, "='", v,
             "' is not a non-negative integer. Fix: set it to the ", what, ".");
  return static_cast<int>(parsed);
}

// host:port from "tcp://host:port" (or the environment for env://).
std::pair<std::string, uint16_t> tcp_address(const std::string& rendezvous) {
  std::string host, port;
  if (rendezvous == "env://") {
    host = env_first({"KILN_MASTER_ADDR", "MASTER_ADDR"});
    port = env_first({"KILN_MASTER_PORT", "MASTER_PORT"});
    KILN_CHECK(!host.empty() && !port.empty(), "kiln::distributed::init: env:// rendezvous needs KILN_MASTER_ADDR and "
               "KILN_MASTER_PORT (rank 0's address and a free port), found ", host.empty() ? "no address" : host,
               " and ", port.empty() ? "no port" : port, ". Fix: start the job with kiln launch, or set both.");
  } else {
    std::string rest = rendezvous.substr(6);
    size_t colon = rest.rfind(':');
    KILN_CHECK(colon != std::string::npos && colon > 0, "kiln::distributed::init: rendezvous '", rendezvous,
               "' has no port. Fix: write tcp://host:port.");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  KILN_CHECK(end && *end == '\0' && p > 0 && p < 65536, "kiln::distributed::init: port '", port, "' is not a TCP "
             "port. Fix: use a number in [1, 65535].");
  return {host, static_cast<uint16_t>(p)};
}

// Whether every rank runs on this machine: then the ranks meet over loopback, which always
// resolves; otherwise Gloo uses this host's name (or KILN_GLOO_INTERFACE).
// The rendezvous host init() met on ("" for a FileStore or a group made by new_group()).
std::string rendezvous_host;

bool on_one_machine(int world_size) {
  std::string local = env_first({"KILN_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE"});
  if (!local.empty()) return std::atoi(local.c_str()) == world_size;
  std::string host = !rendezvous_host.empty() ? rendezvous_host : env_first({"KILN_MASTER_ADDR", "MASTER_ADDR"});
  return host.empty() || host == "127.0.0.1" || host == "localhost" || host == "::1";
}

ProcessGroup& require_group(const char* what) {
  KILN_CHECK(the_group, "kiln::distributed::", what, ": no process group; call kiln::distributed::init() first "
             "(under kiln launch --nproc N).");
  return *the_group;
}

}  // namespace

std::unique_ptr<ProcessGroup> new_group(const std::string& backend, int rank, int world_size,
                                        std::shared_ptr<Store> store, Milliseconds timeout, const std::string& prefix) {
  KILN_CHECK(backend == "gloo" || backend == "nccl", "kiln::distributed: unknown backend '", backend, "'. Fix: use "
             "\"gloo\" (CPU tensors) or \"nccl\" (CUDA tensors, one GPU per rank).");
  if (backend == "nccl")
    return make_nccl_group(
        {.rank = rank, .world_size = world_size, .store = std::move(store), .timeout = timeout, .prefix = prefix});
  GlooOptions o{.rank = rank, .world_size = world_size, .store = std::move(store), .timeout = timeout, .prefix = prefix};
  o.interface = env_first({"KILN_GLOO_INTERFACE", "GLOO_SOCKET_IFNAME"});
  if (o.interface.empty() && on_one_machine(world_size)) o.hostname = "127.0.0.1";
  return make_gloo_group(o);
}

void init(InitOptions options) {
  std::lock_guard<std::mutex> lock(group_mutex);
  KILN_CHECK(!the_group, "kiln::distributed::init: already initialized (rank ", the_group ? the_group->rank() : 0,
             " of ", the_group ? the_group->size() : 0, "). Fix: call it once per process, or destroy() first.");
  int rank = options.rank >= 0 ? options.rank : env_int({"KILN_RANK", "RANK"}, "rank");
  int world = options.world_size >= 0 ? options.world_size : env_int({"KILN_WORLD_SIZE", "WORLD_SIZE"}, "world size");
  KILN_CHECK(world >= 1 && rank < world, "kiln::distributed::init: rank ", rank, " is not below the world size ",
             world, ". Fix: KILN_RANK must be in [0, KILN_WORLD_SIZE).");
  Milliseconds timeout = options.timeout;
  if (std::string t = env_first({"KILN_DIST_TIMEOUT_MS"}); !t.empty()) timeout = Milliseconds(std::stoll(t));
  std::shared_ptr<Store> store;
  const std::string& r = options.rendezvous;
  if (r == "env://" || r.rfind("tcp://", 0) == 0) {
    auto [host, port] = tcp_address(r);
    rendezvous_host = host;
    TcpStoreOptions so;
    so.host = host;
    so.port = port;
    so.is_server = rank == 0;
    so.connect_timeout = timeout;
    store = std::make_shared<TcpStore>(so);
  } else if (r.rfind("file://", 0) == 0) {
    auto file_store = std::make_shared<FileStore>(r.substr(7));
    KILN_CHECK(!file_store->check("default_pg/joined/" + std::to_string(rank)), "kiln::distributed::init: ", r,
               " already holds rank ", rank, "'s keys from an earlier job. Fix: use a fresh folder for every job.");
    store = file_store;
  } else {
    KILN_FAIL("kiln::distributed::init: unknown rendezvous '", r, "'. Fix: use env://, tcp://host:port or "
              "file:///path/to/fresh/folder.");
  }
  the_group = new_group(options.backend, rank, world, std::move(store), timeout);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return the_group != nullptr;
}

void destroy() {
  std::unique_ptr<ProcessGroup> group;
  {
    std::lock_guard<std::mutex> lock(group_mutex);
    group = std::move(the_group);
  }
  group.reset();  // runs what is queued, then closes
}

ProcessGroup& default_group() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return require_group("default_group");
}

int rank() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return the_group ? the_group->rank() : 0;
}

int world_size() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return the_group ? the_group->size() : 1;
}

int local_rank() {
  std::string v = env_first({"KILN_LOCAL_RANK", "LOCAL_RANK"});
  return v.empty() ? 0 : std::atoi(v.c_str());
}

Work all_reduce(Tensor& tensor, ReduceOp op, CollectiveOptions options) {
  return default_group().all_reduce(tensor, op, options);
}
Work broadcast(Tensor& tensor, int root, CollectiveOptions options) {
  return default_group().broadcast(tensor, root, options);
}
Work all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions options) {
  return default_group().all_gather(outputs, input, options);
}
Work all_gather_into_tensor(Tensor& output, const Tensor& input, CollectiveOptions options) {
  return default_group().all_gather_into_tensor(output, input, options);
}
Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op, CollectiveOptions options) {
  return default_group().reduce_scatter(output, inputs, op, options);
}
Work reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op, CollectiveOptions options) {
  return default_group().reduce_scatter_tensor(output, input, op, options);
}
Work barrier(CollectiveOptions options) { return default_group().barrier(options); }

}  // namespace kiln::distributed
