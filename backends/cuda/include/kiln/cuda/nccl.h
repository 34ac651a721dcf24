// NCCL, NVIDIA's collective library for GPUs, loaded at run time like the driver and cuBLASLt:
// kiln never links it, so neither building kiln nor running it on a CPU needs it. kiln looks
// for KILN_NCCL (a path) when set, else libnccl.so.2 and libnccl.so through the dynamic
// loader, else lib64/libnccl.so.2 under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (PyTorch's
// wheels carry one too: nvidia/nccl/lib in its site-packages). The types and values below are
// NCCL's own (nccl.h, ABI-stable across 2.x); declaring them keeps the toolkit out of the
// build. kiln::distributed's nccl process group is the user-facing side.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kiln::cuda::nccl {

using Result = int;  // ncclResult_t
using Comm = struct ncclComm*;
using Stream = struct CUstream_st*;
struct UniqueId {
  char internal[128];
};

constexpr Result kSuccess = 0;
constexpr Result kInProgress = 7;

// ncclDataType_t
constexpr int kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5, kFloat16 = 6,
              kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9;
// ncclRedOp_t (ncclAvg since NCCL 2.10)
constexpr int kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4;

// The entry points kiln calls, resolved by name.
struct Api {
  Result (*ncclGetVersion)(int* version);
  Result (*ncclGetUniqueId)(UniqueId* id);
  Result (*ncclCommInitRank)(Comm* comm, int nranks, UniqueId id, int rank);
  Result (*ncclCommDestroy)(Comm comm);
  Result (*ncclCommAbort)(Comm comm);
  Result (*ncclCommGetAsyncError)(Comm comm, Result* async_error);
  const char* (*ncclGetErrorString)(Result result);
  const char* (*ncclGetLastError)(Comm comm);
  Result (*ncclAllReduce)(const void* send, void* recv, size_t count, int datatype, int op, Comm comm,
                          Stream stream);
  Result (*ncclBroadcast)(const void* send, void* recv, size_t count, int datatype, int root, Comm comm,
                          Stream stream);
  Result (*ncclReduce)(const void* send, void* recv, size_t count, int datatype, int op, int root, Comm comm,
                       Stream stream);
  Result (*ncclAllGather)(const void* send, void* recv, size_t send_count, int datatype, Comm comm,
                          Stream stream);
  Result (*ncclReduceScatter)(const void* send, void* recv, size_t recv_count, int datatype, int op,
                              Comm comm, Stream stream);
  Result (*ncclGroupStart)();
  Result (*ncclGroupEnd)();
};

// The outcome of loading NCCL: the API, or why not in words a user can act on.
struct Loaded {
  std::unique_ptr<Api> api;  // null when unavailable
  std::string library;
  int version = 0;  // ncclGetVersion: 22809 for 2.28.9
  std::string unavailable_reason;
};

// Opens `explicit_path` alone when not empty, else searches as above. Never throws; each call
// loads afresh (tests check the reasons with it).
Loaded load(const std::string& explicit_path);
// The process's NCCL: load(KILN_NCCL or ""), once, on first use.
const Loaded& loaded();

bool available();
std::string unavailable_reason();
// "2.28.9", or "" when unavailable.
std::string version_string();

// "unhandled system error", or "ncclResult_t 9" when the library cannot name it.
std::string result_name(Result result);

// Makes GPU `device`'s primary context current on this thread, where NCCL (which uses the CUDA
// runtime) finds its device; throws kiln::Error without a GPU.
void bind_device(int device);

}  // namespace kiln::cuda::nccl
