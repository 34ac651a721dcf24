// A fake NCCL: a stand-in for libnccl that the fake-driver tests load through KILN_NCCL, so that
// kiln's nccl process group (kiln/cuda/nccl.h) runs on machines without a GPU. It exports the
// part of NCCL's C ABI that kiln calls. The ranks (processes, or threads, of one machine) meet in
// POSIX shared memory named by the unique id: a few counters, each rank's pid, and a slot of data
// per rank. A collective moves through the slots in rounds that fit them: each rank copies its
// part in, waits for all, computes its own result from every slot, and waits again before the
// slots are reused. It all runs at once on the calling thread, like everything on the fake
// driver, whatever the stream; the buffers are the fake driver's device memory (fake_memory.h).
// Reductions take ranks 0..n-1 in order, so every rank gets the same bits; float16 and bfloat16
// are reduced in float and rounded once.
//
// A wait ends with ncclInternalError when ncclCommAbort is called from another thread, or with
// ncclRemoteError when a peer's process is gone; else it waits forever, as NCCL does. Abort frees
// the shared memory once the calls it ends have left, but keeps the small communicator struct for
// good, so that later calls on it are refused (ncclInvalidUsage) instead of reading freed memory.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "fake_memory.h"
#include "kiln/cuda/nccl.h"

namespace nccl = kiln::cuda::nccl;
using kiln::cuda::fake::host_address;
using nccl::ncclComm;
using nccl::Result;
using Clock = std::chrono::steady_clock;

namespace {

constexpr Result kSuccess = 0, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4,
                 kInvalidUsage = 5, kRemoteError = 6;

// Small, because every rank's slot lives in /dev/shm, which a default Docker container caps at
// 64 MiB, and tests run several communicators at once.
constexpr size_t kSlotBytes = size_t{1} << 20;
constexpr int kMaxRanks = 1024;  // so that a reduce-scatter round has room for every rank's part
constexpr size_t kElementBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};  // by ncclDataType_t
// A wait yields for kSpinPolls polls, then sleeps between polls; every kCheckInterval it looks
// for an abort, a dead peer or (in ncclCommInitRank) its deadline.
constexpr int kSpinPolls = 200;
constexpr auto kPollSleep = std::chrono::microseconds(100);
constexpr auto kCheckInterval = std::chrono::milliseconds(20);

// The shared memory starts with a Header, then a Peer per rank, then the slots from the next page
// on. A fresh segment is zero-filled, which is the state before any rank came, so the fields are
// plain integers that need no constructor, each accessed through std::atomic_ref: lock-free, hence
// atomic between processes too.
struct Header {
  int32_t nranks;       // set by the first rank to come; the others must agree
  int32_t joined;       // ranks that reached ncclCommInitRank
  uint32_t arrived;     // ranks in the current barrier
  uint32_t generation;  // barriers passed
};
struct Peer {
  int32_t pid;
  uint32_t barriers;  // barriers this rank entered, to tell a peer that has not arrived yet
};
static_assert(std::atomic_ref<int32_t>::is_always_lock_free &&
              std::atomic_ref<uint32_t>::is_always_lock_free);

size_t slots_offset(int nranks) { return (sizeof(Header) + nranks * sizeof(Peer) + 4095) / 4096 * 4096; }

template <class... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// Whether process `pid` still runs: kill finds it and it is no zombie (a child that exited is
// kept, in state Z, until its parent reaps it).
bool running(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // gone this instant, or no procfs: kill tells next time
  const size_t name_end = line.rfind(')');     // "pid (name) state ...", and the name may hold ')'
  const char state = name_end != std::string::npos && name_end + 2 < line.size() ? line[name_end + 2] : 'R';
  return state != 'Z' && state != 'X';
}

// Polls until `done()`; every kCheckInterval, `check()` may end the wait with its error.
template <class Done, class Check>
Result wait_until(Done done, Check check) {
  auto next_check = Clock::now() + kCheckInterval;
  for (int polls = 0; !done(); ++polls) {
    if (polls < kSpinPolls) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(kPollSleep);
    if (Clock::now() < next_check) continue;
    if (Result r = check()) return r;
    next_check = Clock::now() + kCheckInterval;
  }
  return kSuccess;
}

// Records `message` as the last error of `comm` (when not null) and of the process; returns `code`.
Result refuse(ncclComm* comm, Result code, const std::string& message);

}  // namespace

struct kiln::cuda::nccl::ncclComm {
  int rank = 0, nranks = 0;
  std::byte* memory = nullptr;  // the shared memory, mapped; null once aborted
  size_t bytes = 0;
  std::atomic<bool> aborted{false};
  std::atomic<Result> async_error{kSuccess};  // the first failure while communicating
  std::mutex mutex;                           // guards the rest
  std::condition_variable idle;               // in_flight fell to 0
  int in_flight = 0;                          // calls that ncclCommAbort waits for
  std::string last_error;

  ~ncclComm() {
    if (memory) munmap(memory, bytes);
  }
  Header& header() { return *reinterpret_cast<Header*>(memory); }
  Peer& peer(int r) { return reinterpret_cast<Peer*>(memory + sizeof(Header))[r]; }
  std::byte* slot(int r) { return memory + slots_offset(nranks) + r * kSlotBytes; }

  Result fail(Result code, const std::string& message) {
    Result none = kSuccess;
    async_error.compare_exchange_strong(none, code);
    return refuse(this, code, message);
  }

  // A generation-counter barrier: the last rank to arrive resets the count and starts the next
  // generation, which the others wait for. Fails on an abort, or when a rank that has not
  // arrived is gone (one that arrived may exit normally once the barrier passed).
  Result barrier(const char* op) {
    Header& h = header();
    const uint32_t generation = std::atomic_ref(h.generation).load();
    const uint32_t entered = std::atomic_ref(peer(rank).barriers).fetch_add(1) + 1;
    if (std::atomic_ref(h.arrived).fetch_add(1) + 1 == static_cast<uint32_t>(nranks)) {
      std::atomic_ref(h.arrived).store(0);
      std::atomic_ref(h.generation).store(generation + 1);
      return kSuccess;
    }
    return wait_until([&] { return std::atomic_ref(h.generation).load() != generation; }, [&]() -> Result {
      if (aborted)
        return fail(kInternalError, text("fake nccl: ", op, " on rank ", rank, " aborted by ncclCommAbort"));
      for (int r = 0; r < nranks; ++r) {
        const pid_t pid = std::atomic_ref(peer(r).pid).load();
        if (pid == getpid() || running(pid)) continue;
        // Read after finding it gone, since a peer exits only after it arrived.
        const auto behind = static_cast<int32_t>(std::atomic_ref(peer(r).barriers).load() - entered);
        if (behind < 0)
          return fail(kRemoteError, text("fake nccl: rank ", r, " (pid ", pid, ") exited during ", op));
      }
      return kSuccess;
    });
  }
};

namespace {

std::mutex process_error_mutex;
std::string process_error;  // the latest failure of any call, for ncclGetLastError(nullptr)

Result refuse(ncclComm* comm, Result code, const std::string& message) {
  if (comm) {
    std::lock_guard lock(comm->mutex);
    comm->last_error = message;
  }
  std::lock_guard lock(process_error_mutex);
  process_error = message;
  return code;
}

// Runs `body(comm)` as a call that ncclCommAbort waits for; refuses a null or aborted comm.
template <class Body>
Result call(ncclComm* comm, const char* op, Body body) {
  if (!comm) return refuse(nullptr, kInvalidArgument, text("fake nccl: ", op, ": comm is null"));
  {
    std::unique_lock lock(comm->mutex);
    if (comm->aborted) {
      lock.unlock();
      return refuse(comm, kInvalidUsage, text("fake nccl: ", op, ": the communicator was aborted"));
    }
    ++comm->in_flight;
  }
  const Result result = body(*comm);
  std::lock_guard lock(comm->mutex);
  if (--comm->in_flight == 0) comm->idle.notify_all();
  return result;
}

struct Buffer {
  const char* name;
  const void* address;
  bool used = true;  // by this rank (a broadcast's sendbuff is the root's alone)
};

// Refuses what NCCL refuses with ncclInvalidArgument: a bad datatype, op, root or used buffer.
Result check_arguments(ncclComm& c, const char* op, size_t count, int datatype, std::optional<int> redop,
                       std::optional<int> root, std::initializer_list<Buffer> buffers) {
  std::string why;
  if (datatype < nccl::kInt8 || datatype > nccl::kBfloat16)
    why = text("datatype ", datatype, " is not an ncclDataType_t");
  else if (redop && (*redop < nccl::kSum || *redop > nccl::kAvg))
    why = text("op ", *redop, " is not an ncclRedOp_t");
  else if (root && (*root < 0 || *root >= c.nranks))
    why = text("root ", *root, " is not one of ", c.nranks, " ranks");
  for (const Buffer& b : buffers) {
    if (!why.empty() || !b.used || count == 0) continue;
    if (!b.address) why = text(b.name, " is null");
    else if (reinterpret_cast<uintptr_t>(b.address) < kiln::cuda::fake::kDeviceOffset)
      why = text(b.name, " ", b.address, " is not device memory of the fake driver");
  }
  return why.empty() ? kSuccess : refuse(&c, kInvalidArgument, text("fake nccl: ", op, ": ", why));
}

// Runs a collective of `count` elements in rounds of at most `per_round`: `publish(first, n)`
// fills this rank's slot, and once every rank did, `consume(first, n)` reads the slots.
template <class Publish, class Consume>
Result in_rounds(ncclComm& c, const char* op, size_t count, size_t per_round, Publish publish,
                 Consume consume) {
  for (size_t first = 0; first < count; first += per_round) {
    const size_t n = std::min(per_round, count - first);
    publish(first, n);
    if (Result r = c.barrier(op)) return r;
    consume(first, n);
    if (Result r = c.barrier(op)) return r;  // before the next round overwrites the slots
  }
  return kSuccess;
}

// The 16-bit floats are reduced in float, and rounded back to nearest even.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

float widen(Half h) {
  const uint32_t sign = uint32_t{h.bits & 0x8000u} << 16, exponent = h.bits >> 10 & 0x1f,
                 mantissa = h.bits & 0x3ff;
  if (exponent == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | mantissa << 13);
  return std::bit_cast<float>(sign | (exponent + 112) << 23 | mantissa << 13);
}
float widen(BFloat16 b) { return std::bit_cast<float>(uint32_t{b.bits} << 16); }
template <class T>
T widen(T v) { return v; }

uint16_t float_to_half(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f), magnitude = bits & 0x7fffffffu;
  const auto sign = static_cast<uint16_t>(bits >> 16 & 0x8000u);
  if (magnitude > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00;  // 65520 and up round to infinity
  if (magnitude < 0x38800000u) {                       // below 2^-14: subnormal, in units of 2^-24
    const float units = std::bit_cast<float>(magnitude) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(units));  // the default mode: to nearest even
  }
  uint32_t h = (magnitude - 0x38000000u) >> 13;  // rebiased exponent and top 10 mantissa bits
  const uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is right
  return sign | static_cast<uint16_t>(h);
}

template <class T, class A>
T narrow(A v) {
  if constexpr (std::is_same_v<T, Half>) {
    return {float_to_half(v)};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>(bits >> 16 | 0x40)};  // a quiet NaN
    return {static_cast<uint16_t>((bits + 0x7fff + (bits >> 16 & 1)) >> 16)};
  } else {
    return v;
  }
}

template <class A>
A combine(int op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    // In unsigned arithmetic at least as wide as int, where overflow wraps (as on a GPU) instead
    // of being undefined.
    using Wide = decltype(std::make_unsigned_t<A>{} + 0u);
    if (op == nccl::kSum || op == nccl::kAvg) return static_cast<A>(Wide(a) + Wide(b));
    if (op == nccl::kProd) return static_cast<A>(Wide(a) * Wide(b));
  } else {
    if (op == nccl::kSum || op == nccl::kAvg) return a + b;
    if (op == nccl::kProd) return a * b;
    if (std::isnan(a)) return a;  // max and min propagate NaN
    if (std::isnan(b)) return b;
  }
  return op == nccl::kMax ? (a < b ? b : a) : (b < a ? b : a);
}

// out[i] = `op` over ranks 0..n-1, in that order, of element first + i of each rank's slot.
template <class T>
void reduce_slots(ncclComm& c, int op, size_t first, size_t n, T* out) {
  for (size_t i = 0; i < n; ++i) {
    auto element = [&](int r) { return widen(reinterpret_cast<const T*>(c.slot(r))[first + i]); };
    auto acc = element(0);
    for (int r = 1; r < c.nranks; ++r) acc = combine(op, acc, element(r));
    if (op == nccl::kAvg) acc = static_cast<decltype(acc)>(acc / c.nranks);  // integers: toward zero
    out[i] = narrow<T>(acc);
  }
}

template <class Fn>
Result with_type(int datatype, Fn fn) {
  switch (datatype) {
    case nccl::kInt8: return fn(int8_t{});
    case nccl::kUint8: return fn(uint8_t{});
    case nccl::kInt32: return fn(int32_t{});
    case nccl::kUint32: return fn(uint32_t{});
    case nccl::kInt64: return fn(int64_t{});
    case nccl::kUint64: return fn(uint64_t{});
    case nccl::kFloat16: return fn(Half{});
    case nccl::kFloat32: return fn(float{});
    case nccl::kFloat64: return fn(double{});
    default: return fn(BFloat16{});
  }
}

// An all-reduce, or with a root a reduce to it.
Result reduce(ncclComm& c, const char* name, const void* send, void* recv, size_t count, int datatype, int op,
              std::optional<int> root) {
  const bool receives = !root || *root == c.rank;
  if (Result r = check_arguments(c, name, count, datatype, op, root,
                                 {{"sendbuff", send}, {"recvbuff", recv, receives}}))
    return r;
  return with_type(datatype, [&]<class T>(T) {
    const T* in = host_address<const T>(send);
    T* out = host_address<T>(recv);
    return in_rounds(
        c, name, count, kSlotBytes / sizeof(T),
        [&](size_t first, size_t n) { std::memcpy(c.slot(c.rank), in + first, n * sizeof(T)); },
        [&](size_t first, size_t n) { if (receives) reduce_slots(c, op, 0, n, out + first); });
  });
}

}  // namespace

#define KILN_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

KILN_FAKE_EXPORT Result ncclGetVersion(int* version) {
  if (!version) return refuse(nullptr, kInvalidArgument, "fake nccl: ncclGetVersion: version is null");
  *version = 22809;  // 2.28.9
  return kSuccess;
}

// "/kiln_fake_nccl_<pid>_<counter>_<random>": a name for shm_open.
KILN_FAKE_EXPORT Result ncclGetUniqueId(nccl::UniqueId* id) {
  if (!id) return refuse(nullptr, kInvalidArgument, "fake nccl: ncclGetUniqueId: id is null");
  static std::atomic<uint64_t> counter{0};
  const std::string name = text("/kiln_fake_nccl_", getpid(), "_", counter++, "_", std::random_device{}());
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, name.data(), name.size());
  return kSuccess;
}

KILN_FAKE_EXPORT Result ncclCommInitRank(nccl::Comm* out, int nranks, nccl::UniqueId id, int rank) {
  auto refused = [&](Result code, const auto&... why) {
    return refuse(nullptr, code, text("fake nccl: ncclCommInitRank: ", why...));
  };
  if (!out) return refused(kInvalidArgument, "comm is null");
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    return refused(kInvalidArgument, "rank ", rank, " of ", nranks, " is out of range (1 to ", kMaxRanks,
                   " ranks)");
  const std::string name(id.internal, strnlen(id.internal, sizeof(id.internal)));
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos)
    return refused(kInvalidArgument, "the id is not one from ncclGetUniqueId");
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return refused(kSystemError, "shm_open ", name, ": ", std::strerror(errno));
  auto c = std::make_unique<ncclComm>();
  c->rank = rank;
  c->nranks = nranks;
  c->bytes = slots_offset(nranks) + nranks * kSlotBytes;
  // Every rank sizes the segment alike. fallocate, unlike ftruncate, never shrinks it under a rank
  // that mapped more, and reserves the memory: a full /dev/shm fails here, not with SIGBUS later.
  int error = fallocate(fd, 0, 0, static_cast<off_t>(c->bytes)) == 0 ? 0 : errno;
  if (error == EOPNOTSUPP) error = ftruncate(fd, static_cast<off_t>(c->bytes)) == 0 ? 0 : errno;
  void* memory = error ? MAP_FAILED : mmap(nullptr, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!error && memory == MAP_FAILED) error = errno;
  close(fd);
  if (error)
    return refused(kSystemError, "cannot map ", c->bytes, " bytes of /dev/shm: ", std::strerror(error));
  c->memory = static_cast<std::byte*>(memory);
  Header& h = c->header();
  int32_t agreed = 0, other_pid = 0;
  if (!std::atomic_ref(h.nranks).compare_exchange_strong(agreed, nranks) && agreed != nranks)
    return refused(kInvalidArgument, "rank ", rank, " was told of ", nranks, " ranks, another rank of ",
                   agreed);
  if (!std::atomic_ref(c->peer(rank).pid).compare_exchange_strong(other_pid, getpid()))
    return refused(kInvalidArgument, "pids ", other_pid, " and ", getpid(), " both are rank ", rank);
  std::atomic_ref(h.joined).fetch_add(1);
  const char* timeout_env = std::getenv("KILN_FAKE_NCCL_INIT_MS");
  const long timeout_ms = timeout_env && *timeout_env ? std::atol(timeout_env) : 60000;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto all_joined = [&] { return std::atomic_ref(h.joined).load() >= nranks; };
  const Result joined = wait_until(all_joined, [&]() -> Result {
    if (Clock::now() < deadline) return kSuccess;
    shm_unlink(name.c_str());  // leave nothing in /dev/shm; a straggler makes a new one and times out
    return refused(kSystemError, "rank ", rank, " timed out after ", timeout_ms,
                   " ms (KILN_FAKE_NCCL_INIT_MS) with ", std::atomic_ref(h.joined).load(), " of ", nranks,
                   " ranks joined");
  });
  if (joined != kSuccess) return joined;
  // Every rank joined after it had the segment open, so the name is no longer needed.
  if (rank == 0) shm_unlink(name.c_str());
  *out = c.release();
  return kSuccess;
}

// The shared memory goes once every rank's mapping did.
KILN_FAKE_EXPORT Result ncclCommDestroy(nccl::Comm comm) {
  if (comm && comm->aborted)
    return refuse(comm, kInvalidUsage,
                  "fake nccl: ncclCommDestroy: the communicator was aborted, which released it");
  delete comm;
  return kSuccess;
}

KILN_FAKE_EXPORT Result ncclCommAbort(nccl::Comm comm) {
  if (!comm) return kSuccess;
  std::unique_lock lock(comm->mutex);
  if (comm->aborted.exchange(true)) {
    lock.unlock();
    return refuse(comm, kInvalidUsage, "fake nccl: ncclCommAbort: the communicator was aborted already");
  }
  // A blocked call sees the flag within kCheckInterval and leaves; then nothing reads the memory.
  comm->idle.wait(lock, [&] { return comm->in_flight == 0; });
  munmap(comm->memory, comm->bytes);
  comm->memory = nullptr;
  return kSuccess;
}

KILN_FAKE_EXPORT const char* ncclGetErrorString(Result result) {
  static const char* const names[] = {"no error",        "unhandled cuda error", "unhandled system error",
                                      "internal error",  "invalid argument",     "invalid usage",
                                      "remote process exited or there was a network error",
                                      "NCCL operation in progress"};
  return result >= 0 && result < 8 ? names[result] : "unknown result code";
}

KILN_FAKE_EXPORT Result ncclCommGetAsyncError(nccl::Comm comm, Result* async_error) {
  if (!comm || !async_error)
    return refuse(comm, kInvalidArgument, "fake nccl: ncclCommGetAsyncError: null argument");
  *async_error = comm->async_error;
  return kSuccess;
}

// The last failure on `comm` (even after an abort), or with null the process's last (such as
// ncclCommInitRank's). The text is copied per thread, so it stays while other threads fail.
KILN_FAKE_EXPORT const char* ncclGetLastError(nccl::Comm comm) {
  thread_local std::string copy;
  std::lock_guard lock(comm ? comm->mutex : process_error_mutex);
  copy = comm ? comm->last_error : process_error;
  return copy.c_str();
}

// These two, like the two above, still answer after an abort.
KILN_FAKE_EXPORT Result ncclCommCount(const nccl::Comm comm, int* count) {
  if (!comm || !count) return refuse(comm, kInvalidArgument, "fake nccl: ncclCommCount: null argument");
  *count = comm->nranks;
  return kSuccess;
}

KILN_FAKE_EXPORT Result ncclCommUserRank(const nccl::Comm comm, int* rank) {
  if (!comm || !rank) return refuse(comm, kInvalidArgument, "fake nccl: ncclCommUserRank: null argument");
  *rank = comm->rank;
  return kSuccess;
}

KILN_FAKE_EXPORT Result ncclAllReduce(const void* send, void* recv, size_t count, int datatype, int op,
                                      nccl::Comm comm, nccl::Stream) {
  return call(comm, "all_reduce", [&](ncclComm& c) {
    return reduce(c, "all_reduce", send, recv, count, datatype, op, std::nullopt);
  });
}

KILN_FAKE_EXPORT Result ncclReduce(const void* send, void* recv, size_t count, int datatype, int op, int root,
                                   nccl::Comm comm, nccl::Stream) {
  return call(comm, "reduce", [&](ncclComm& c) {
    return reduce(c, "reduce", send, recv, count, datatype, op, root);
  });
}

// A non-root rank's sendbuff is not read.
KILN_FAKE_EXPORT Result ncclBroadcast(const void* send, void* recv, size_t count, int datatype, int root,
                                      nccl::Comm comm, nccl::Stream) {
  return call(comm, "broadcast", [&](ncclComm& c) -> Result {
    if (Result r = check_arguments(c, "broadcast", count, datatype, std::nullopt, root,
                                   {{"sendbuff", send, c.rank == root}, {"recvbuff", recv}}))
      return r;
    const size_t size = kElementBytes[datatype];
    const auto* in = host_address<const std::byte>(send);
    auto* out = host_address<std::byte>(recv);
    return in_rounds(
        c, "broadcast", count, kSlotBytes / size,
        [&](size_t first, size_t n) {
          if (c.rank == root) std::memcpy(c.slot(root), in + first * size, n * size);
        },
        [&](size_t first, size_t n) { std::memcpy(out + first * size, c.slot(root), n * size); });
  });
}

// recv holds rank r's send at r * send_count; in place, send is this rank's part of recv.
KILN_FAKE_EXPORT Result ncclAllGather(const void* send, void* recv, size_t send_count, int datatype,
                                      nccl::Comm comm, nccl::Stream) {
  return call(comm, "all_gather", [&](ncclComm& c) -> Result {
    if (Result r = check_arguments(c, "all_gather", send_count, datatype, std::nullopt, std::nullopt,
                                   {{"sendbuff", send}, {"recvbuff", recv}}))
      return r;
    const size_t size = kElementBytes[datatype];
    const auto* in = host_address<const std::byte>(send);
    auto* out = host_address<std::byte>(recv);
    return in_rounds(
        c, "all_gather", send_count, kSlotBytes / size,
        [&](size_t first, size_t n) { std::memcpy(c.slot(c.rank), in + first * size, n * size); },
        [&](size_t first, size_t n) {
          for (int r = 0; r < c.nranks; ++r)
            std::memcpy(out + (r * send_count + first) * size, c.slot(r), n * size);
        });
  });
}

// Rank r's recv is the reduction of everyone's send at r * recv_count; in place, recv is this
// rank's part of send. In each round a slot holds the same n elements of each rank's part.
KILN_FAKE_EXPORT Result ncclReduceScatter(const void* send, void* recv, size_t recv_count, int datatype,
                                          int op, nccl::Comm comm, nccl::Stream) {
  return call(comm, "reduce_scatter", [&](ncclComm& c) -> Result {
    if (Result r = check_arguments(c, "reduce_scatter", recv_count, datatype, op, std::nullopt,
                                   {{"sendbuff", send}, {"recvbuff", recv}}))
      return r;
    return with_type(datatype, [&]<class T>(T) {
      const T* in = host_address<const T>(send);
      T* out = host_address<T>(recv);
      return in_rounds(
          c, "reduce_scatter", recv_count, kSlotBytes / sizeof(T) / c.nranks,
          [&](size_t first, size_t n) {
            for (int r = 0; r < c.nranks; ++r)
              std::memcpy(c.slot(c.rank) + r * n * sizeof(T), in + r * recv_count + first, n * sizeof(T));
          },
          [&](size_t first, size_t n) { reduce_slots(c, op, c.rank * n, n, out + first); });
    });
  });
}

// Each collective ran when called, so a group has nothing left to launch. (One thread driving
// several ranks of a communicator in a group would block at its first call.)
KILN_FAKE_EXPORT Result ncclGroupStart() { return kSuccess; }
KILN_FAKE_EXPORT Result ncclGroupEnd() { return kSuccess; }
