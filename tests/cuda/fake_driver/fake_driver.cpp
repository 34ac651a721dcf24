// A fake CUDA driver: a stand-in for libcuda.so.1 that the test suite loads through
// KILN_CUDA_DRIVER, so that kiln's CUDA plumbing (allocation, copies, streams, events) is
// tested on machines without a GPU. "Device" memory is host memory handed out at addresses
// the host cannot dereference, so a host read of device memory crashes the test instead of
// passing silently. Work runs synchronously, so every stream and event is always complete;
// a stream that captures a CUDA graph records its work instead, and launching the graph runs
// what it recorded.
// Kernels run only when the fake NVRTC (fake_nvrtc.cpp) made them: then they run on the host;
// real PTX fails to load with CUDA_ERROR_NOT_SUPPORTED.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "fake_memory.h"
#include "kiln/cuda/driver.h"

using namespace kiln::cuda::driver;

// Work queued on a stream, run now or recorded into a CUDA graph.
using Work = std::function<CUresult()>;

// The handles behind CUstream, CUevent and the graphs, which driver.h declares but leaves
// incomplete.
struct kiln::cuda::driver::CUstream_st {
  unsigned flags;
  bool capturing = false;
  bool invalidated = false;  // the capture met work it cannot record
  std::vector<Work> recorded;
};
struct kiln::cuda::driver::CUgraph_st {
  std::vector<Work> work;
};
struct kiln::cuda::driver::CUgraphExec_st {
  std::vector<Work> work;
};
struct kiln::cuda::driver::CUevent_st {
  unsigned flags;
  bool recorded = false;
  std::chrono::steady_clock::time_point at{};
};

namespace {

constexpr CUresult kInvalidValue = 1;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kIllegalState = 401;
constexpr CUresult kNotFound = 500;
constexpr CUresult kNotSupported = 801;

// Added to a host address to make the device address (fake_memory.h).
constexpr CUdeviceptr kDeviceOffset = kiln::cuda::fake::kDeviceOffset;
constexpr size_t kAlignment = 512;  // what cuMemAlloc guarantees, and kiln's allocator assumes

struct Memory {
  std::mutex mutex;
  std::map<CUdeviceptr, size_t> live;  // device address of each allocation -> its bytes
  size_t in_use = 0;
  size_t limit = 0;
};

Memory& memory() {
  static Memory* m = [] {
    auto* out = new Memory;  // leaked: kiln may free device memory while statics die
    out->limit = size_t{4} << 30;  // 4 GiB unless KILN_FAKE_CUDA_MEMORY_BYTES says otherwise
    const char* env = std::getenv("KILN_FAKE_CUDA_MEMORY_BYTES");
    char* end = nullptr;
    if (env && *env) {
      unsigned long long bytes = std::strtoull(env, &end, 10);
      if (*end == '\0') out->limit = static_cast<size_t>(bytes);
    }
    return out;
  }();
  return *m;
}

// Runs `work` now, or records it when `stream` is capturing a graph.
CUresult enqueue(CUstream stream, Work work) {
  if (stream && stream->capturing) {
    stream->recorded.push_back(std::move(work));
    return kSuccess;
  }
  return work();
}

// The host address behind [ptr, ptr + bytes) when it lies within one live allocation, else
// null. A copy may start inside an allocation (a tensor view, a block the allocator split).
char* host_range(CUdeviceptr ptr, size_t bytes) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.upper_bound(ptr);
  if (it == m.live.begin()) return nullptr;
  --it;
  const CUdeviceptr offset = ptr - it->first;
  if (offset > it->second || bytes > it->second - offset) return nullptr;
  return reinterpret_cast<char*>(static_cast<uintptr_t>(ptr - kDeviceOffset));
}

}  // namespace

#define KILN_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

KILN_FAKE_EXPORT CUresult cuInit(unsigned flags) {
  return flags == 0 ? kSuccess : kInvalidValue;
}

KILN_FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = 13000;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  static constexpr struct {
    CUresult result;
    const char* name;
  } kNames[] = {{kSuccess, "CUDA_SUCCESS"},
                {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
                {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
                {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
                {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
                {kIllegalState, "CUDA_ERROR_ILLEGAL_STATE"},
                {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED"},
                {kStreamCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
                {kStreamCaptureInvalidated, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"}};
  if (!name) return kInvalidValue;
  *name = nullptr;
  for (const auto& n : kNames)
    if (n.result == error) *name = n.name;
  return *name ? kSuccess : kInvalidValue;
}

// One device, ordinal 0.
KILN_FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (!count) return kInvalidValue;
  *count = 1;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device) return kInvalidValue;
  if (ordinal != 0) return kInvalidDevice;
  *device = 0;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!name || length <= 0) return kInvalidValue;
  if (device != 0) return kInvalidDevice;
  std::strncpy(name, "kiln fake GPU", static_cast<size_t>(length));
  name[length - 1] = '\0';
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (!value) return kInvalidValue;
  if (device != 0) return kInvalidDevice;
  *value = 0;
  if (attribute == kAttrMultiprocessorCount) *value = 132;  // an H100's
  // sm_90, or what KILN_FAKE_CUDA_CAPABILITY says ("8.0": an older GPU, for refusals).
  int major = 9, minor = 0;
  if (const char* env = std::getenv("KILN_FAKE_CUDA_CAPABILITY"))
    std::sscanf(env, "%d.%d", &major, &minor);
  if (attribute == kAttrComputeCapabilityMajor) *value = major;
  if (attribute == kAttrComputeCapabilityMinor) *value = minor;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!bytes) return kInvalidValue;
  if (device != 0) return kInvalidDevice;
  *bytes = memory().limit;
  return kSuccess;
}

// Contexts: one dummy primary context; nothing depends on which one is current.
KILN_FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  static char primary;
  if (!context) return kInvalidValue;
  if (device != 0) return kInvalidDevice;
  *context = reinterpret_cast<CUcontext>(&primary);
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext) {
  return kSuccess;
}
KILN_FAKE_EXPORT CUresult cuCtxSynchronize() {
  return kSuccess;
}

// Device memory.
KILN_FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  if (!ptr || bytes == 0) return kInvalidValue;  // as the real driver: no empty allocations
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (bytes > m.limit - m.in_use || bytes > SIZE_MAX - kAlignment) return kOutOfMemory;
  void* host = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (!host) return kOutOfMemory;
  *ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(host)) + kDeviceOffset;
  m.live.emplace(*ptr, bytes);
  m.in_use += bytes;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.find(ptr);
  if (it == m.live.end()) return kInvalidValue;
  std::free(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr - kDeviceOffset)));
  m.in_use -= it->second;
  m.live.erase(it);
  return kSuccess;
}

// Device memory is GPU 0's; any other address is unknown to the driver (the real one answers
// CUDA_ERROR_INVALID_VALUE for host memory it did not allocate or register).
KILN_FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  if (!data || !host_range(ptr, 1)) return kInvalidValue;
  if (attribute == kPointerAttributeMemoryType) {
    *static_cast<unsigned*>(data) = kMemoryTypeDevice;
    return kSuccess;
  }
  if (attribute == kPointerAttributeDeviceOrdinal) {
    *static_cast<int*>(data) = 0;
    return kSuccess;
  }
  return kInvalidValue;
}

KILN_FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return kInvalidValue;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *free_bytes = m.limit - m.in_use;
  *total_bytes = m.limit;
  return kSuccess;
}

// Copies. Empty copies succeed whatever the addresses, as with the real driver.
KILN_FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  if (bytes == 0) return kSuccess;
  char* to = host_range(dst, bytes);
  if (!to || !src) return kInvalidValue;
  std::memcpy(to, src, bytes);
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return kSuccess;
  const char* from = host_range(src, bytes);
  if (!from || !dst) return kInvalidValue;
  std::memcpy(dst, from, bytes);
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                               CUstream stream) {
  if (bytes == 0) return kSuccess;
  if (!host_range(dst, bytes) || !host_range(src, bytes)) return kInvalidValue;
  return enqueue(stream, [=] {
    // The ranges may overlap within one allocation.
    std::memmove(host_range(dst, bytes), host_range(src, bytes), bytes);
    return kSuccess;
  });
}

KILN_FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes,
                                               CUstream stream) {
  return enqueue(stream, [=] { return cuMemcpyHtoD_v2(dst, src, bytes); });
}

KILN_FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes,
                                               CUstream stream) {
  return enqueue(stream, [=] { return cuMemcpyDtoH_v2(dst, src, bytes); });
}

KILN_FAKE_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t count,
                                           CUstream stream) {
  if (count == 0) return kSuccess;
  if (dst % 4 != 0 || count > SIZE_MAX / 4) return kInvalidValue;  // the driver needs alignment
  if (!host_range(dst, count * 4)) return kInvalidValue;
  return enqueue(stream, [=] {
    char* to = host_range(dst, count * 4);
    for (size_t i = 0; i < count; ++i) std::memcpy(to + i * 4, &value, 4);
    return kSuccess;
  });
}

// Pinned host memory is ordinary host memory: the host may read it.
KILN_FAKE_EXPORT CUresult cuMemHostAlloc(void** ptr, size_t bytes, unsigned) {
  if (!ptr || bytes == 0) return kInvalidValue;
  *ptr = std::malloc(bytes);
  return *ptr ? kSuccess : kOutOfMemory;
}

KILN_FAKE_EXPORT CUresult cuMemFreeHost(void* ptr) {
  std::free(ptr);
  return kSuccess;
}

// Streams: work runs as it is enqueued, so a stream never has work pending.
KILN_FAKE_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  if (!stream) return kInvalidValue;
  *stream = new CUstream_st{flags};
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  if (!stream) return kInvalidHandle;
  delete stream;
  return kSuccess;
}

// Waiting on a capturing stream breaks its capture, as with the real driver.
KILN_FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  if (stream && stream->capturing) {
    stream->invalidated = true;
    return kStreamCaptureUnsupported;
  }
  return kSuccess;
}
KILN_FAKE_EXPORT CUresult cuStreamQuery(CUstream stream) {
  return cuStreamSynchronize(stream);
}
KILN_FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned) {
  return kSuccess;
}

// Events: complete as soon as recorded; a recorded event keeps the time it was recorded.
KILN_FAKE_EXPORT CUresult cuEventCreate(CUevent* event, unsigned flags) {
  if (!event) return kInvalidValue;
  *event = new CUevent_st{flags, false, {}};
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream) {
  if (!event) return kInvalidHandle;
  event->recorded = true;
  event->at = std::chrono::steady_clock::now();
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuEventQuery(CUevent event) {
  return event ? kSuccess : kInvalidHandle;
}
KILN_FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  return event ? kSuccess : kInvalidHandle;
}

KILN_FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  if (!event) return kInvalidHandle;
  delete event;
  return kSuccess;
}

// As the real driver, timing needs two recorded events made without kEventDisableTiming.
KILN_FAKE_EXPORT CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  if (!milliseconds) return kInvalidValue;
  if (!start || !end || !start->recorded || !end->recorded) return kInvalidHandle;
  if ((start->flags | end->flags) & kEventDisableTiming) return kInvalidHandle;
  *milliseconds = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return kSuccess;
}

// Modules and kernels. Real PTX never loads (the refusal goes into the JIT error log, which kiln
// shows when a module fails to load). The fake NVRTC's "PTX" names a host library of kernels
// and their launchers (fake_nvrtc.cpp); those load, and launching one runs the kernel on the
// host, synchronously, with device pointers turned into the host addresses behind them.
constexpr const char* kFakePtxHeader = "// kiln fake ptx: ";

struct kiln::cuda::driver::CUmod_st {
  void* library;
};

static void* device_to_host(void* pointer) {
  const auto address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(pointer));
  char* host = pointer ? host_range(address, 0) : nullptr;
  return host ? host : pointer;  // not device memory: left to fault where it is read
}

KILN_FAKE_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned count,
                                             int* options, void** values) {
  if (module) *module = nullptr;
  const char* text = static_cast<const char*>(image);
  if (module && text && std::strncmp(text, kFakePtxHeader, std::strlen(kFakePtxHeader)) == 0) {
    std::string path(text + std::strlen(kFakePtxHeader));
    path.erase(path.find_last_not_of('\n') + 1);
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) return kInvalidValue;
    *module = new CUmod_st{library};
    return kSuccess;
  }
  char* log = nullptr;
  size_t log_bytes = 0;
  for (unsigned i = 0; options && values && i < count; ++i) {
    if (options[i] == kJitErrorLogBuffer) log = static_cast<char*>(values[i]);
    // A size option's value is the size itself, stored in the pointer.
    if (options[i] == kJitErrorLogBufferSizeBytes)
      log_bytes = reinterpret_cast<uintptr_t>(values[i]);
  }
  if (log && log_bytes > 0) {
    std::strncpy(log, "the kiln fake CUDA driver runs no kernels", log_bytes);
    log[log_bytes - 1] = '\0';
  }
  return kNotSupported;
}

using Launcher = void (*)(void** params, void* (*to_host)(void*));

// A kernel: its launcher, and its parameters' sizes (count first) for recording a launch.
struct kiln::cuda::driver::CUfunc_st {
  Launcher launcher;
  const unsigned long long* param_sizes;
};

KILN_FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (!function) return kInvalidValue;
  *function = nullptr;
  if (!module || !name) return kNotSupported;
  void* launcher = dlsym(module->library, (std::string(name) + "__kiln_launch").c_str());
  if (!launcher) return kNotFound;
  const auto* sizes = static_cast<const unsigned long long*>(
      dlsym(module->library, (std::string(name) + "__kiln_param_sizes").c_str()));
  // Kept for the process, as kiln caches kernels by name: one per kernel looked up.
  static std::mutex mutex;
  static std::map<void*, CUfunc_st>* functions = new std::map<void*, CUfunc_st>;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = functions->try_emplace(launcher, CUfunc_st{reinterpret_cast<Launcher>(launcher), sizes});
  *function = &it->second;
  return kSuccess;
}

// The library stays loaded: its kernels may still be cached by name in this process.
KILN_FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  if (!module) return kNotSupported;
  delete module;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, unsigned, unsigned, CUstream stream, void** params,
                                         void**) {
  if (!function) return kNotSupported;
  const Launcher launcher = function->launcher;
  if (!stream || !stream->capturing) {
    launcher(params, device_to_host);
    return kSuccess;
  }
  // Recorded: the parameters are copied now, as the real driver does, since `params` points
  // at the caller's locals.
  if (!function->param_sizes) return kNotSupported;
  std::vector<std::vector<char>> values;
  for (unsigned long long k = 0; k < function->param_sizes[0]; ++k) {
    const char* value = static_cast<const char*>(params[k]);
    values.emplace_back(value, value + function->param_sizes[k + 1]);
  }
  return enqueue(stream, [launcher, values]() mutable {
    std::vector<void*> slots;
    for (std::vector<char>& v : values) slots.push_back(v.data());
    launcher(slots.data(), device_to_host);
    return kSuccess;
  });
}

KILN_FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* data) {
  if (!fn) return kInvalidValue;
  return enqueue(stream, [fn, data] {
    fn(data);
    return kSuccess;
  });
}

// CUDA graphs: a capturing stream records its work (enqueue); a graph replays it in order.
KILN_FAKE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, int) {
  if (!stream) return kStreamCaptureUnsupported;  // the legacy default stream cannot capture
  if (stream->capturing) return kIllegalState;
  stream->capturing = true;
  stream->invalidated = false;
  stream->recorded.clear();
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (!stream || !graph || !stream->capturing) return kIllegalState;
  *graph = nullptr;
  stream->capturing = false;
  std::vector<Work> work = std::move(stream->recorded);
  stream->recorded.clear();
  if (stream->invalidated) return kStreamCaptureInvalidated;
  *graph = new CUgraph_st{std::move(work)};
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream stream, int* status) {
  if (!status) return kInvalidValue;
  *status = stream && stream->capturing ? (stream->invalidated ? 2 : kStreamCaptureStatusActive)
                                        : kStreamCaptureStatusNone;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                      unsigned long long) {
  if (!exec || !graph) return kInvalidValue;
  *exec = new CUgraphExec_st{graph->work};
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (!exec) return kInvalidHandle;
  return enqueue(stream, [exec] {
    for (const Work& w : exec->work)
      if (CUresult r = w(); r != kSuccess) return r;
    return kSuccess;
  });
}

KILN_FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (!exec) return kInvalidHandle;
  delete exec;
  return kSuccess;
}

KILN_FAKE_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  if (!graph) return kInvalidHandle;
  delete graph;
  return kSuccess;
}


// For tests: the device memory kiln holds from the driver right now.
KILN_FAKE_EXPORT size_t kiln_fake_cuda_bytes_in_use() {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.in_use;
}

KILN_FAKE_EXPORT int kiln_fake_cuda_live_allocations() {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  return static_cast<int>(m.live.size());
}

// Every entry point has exactly the signature kiln resolves it with (driver.h's Api).
// clang-format off
#define KILN_FAKE_SAME(name) \
  static_assert(std::is_same_v<decltype(&name), decltype(Api::name)>, #name)
KILN_FAKE_SAME(cuInit); KILN_FAKE_SAME(cuDriverGetVersion); KILN_FAKE_SAME(cuGetErrorName);
KILN_FAKE_SAME(cuDeviceGetCount); KILN_FAKE_SAME(cuDeviceGet); KILN_FAKE_SAME(cuDeviceGetName);
KILN_FAKE_SAME(cuDeviceGetAttribute); KILN_FAKE_SAME(cuDeviceTotalMem_v2);
KILN_FAKE_SAME(cuDevicePrimaryCtxRetain); KILN_FAKE_SAME(cuCtxSetCurrent);
KILN_FAKE_SAME(cuCtxSynchronize); KILN_FAKE_SAME(cuMemAlloc_v2); KILN_FAKE_SAME(cuMemFree_v2);
KILN_FAKE_SAME(cuMemGetInfo_v2); KILN_FAKE_SAME(cuEventCreate); KILN_FAKE_SAME(cuEventRecord);
KILN_FAKE_SAME(cuEventQuery); KILN_FAKE_SAME(cuEventSynchronize); KILN_FAKE_SAME(cuEventDestroy_v2);
KILN_FAKE_SAME(cuMemcpyHtoD_v2); KILN_FAKE_SAME(cuMemcpyDtoH_v2);
KILN_FAKE_SAME(cuMemcpyDtoDAsync_v2); KILN_FAKE_SAME(cuMemsetD32Async);
KILN_FAKE_SAME(cuModuleLoadDataEx); KILN_FAKE_SAME(cuModuleGetFunction);
KILN_FAKE_SAME(cuModuleUnload); KILN_FAKE_SAME(cuStreamCreate); KILN_FAKE_SAME(cuStreamDestroy_v2);
KILN_FAKE_SAME(cuStreamSynchronize); KILN_FAKE_SAME(cuStreamQuery);
KILN_FAKE_SAME(cuStreamWaitEvent); KILN_FAKE_SAME(cuEventElapsedTime);
KILN_FAKE_SAME(cuMemHostAlloc); KILN_FAKE_SAME(cuMemFreeHost); KILN_FAKE_SAME(cuMemcpyHtoDAsync_v2);
KILN_FAKE_SAME(cuMemcpyDtoHAsync_v2); KILN_FAKE_SAME(cuLaunchKernel);
KILN_FAKE_SAME(cuStreamBeginCapture_v2); KILN_FAKE_SAME(cuStreamEndCapture);
KILN_FAKE_SAME(cuStreamIsCapturing); KILN_FAKE_SAME(cuGraphInstantiateWithFlags);
KILN_FAKE_SAME(cuGraphLaunch); KILN_FAKE_SAME(cuGraphExecDestroy); KILN_FAKE_SAME(cuGraphDestroy);
KILN_FAKE_SAME(cuLaunchHostFunc); KILN_FAKE_SAME(cuPointerGetAttribute);
#undef KILN_FAKE_SAME
// clang-format on
