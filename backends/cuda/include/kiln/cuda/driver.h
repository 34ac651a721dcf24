// The CUDA driver API, loaded at run time. kiln never links libcuda: a program built with
// kiln runs on machines without an NVIDIA driver (every CPU-only deployment), and finds the
// driver when one is installed. The few types below are the driver API's own (cuda.h, ABI
// stable since CUDA 3.2 for the _v2 entry points); declaring them here keeps the CUDA
// toolkit out of the build of this library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::cuda::driver {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUhostFn = void (*)(void* data);

// The CUresult values kiln tells apart; every other one is reported by its name.
constexpr CUresult kSuccess = 0;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kStubLibrary = 34;  // the toolkit's libcuda stub, which only links
constexpr CUresult kNoDevice = 100;
constexpr CUresult kNotReady = 600;  // cuEventQuery: the event's work has not run yet
// A stream capture met work that cannot be captured (a host synchronization), and the
// capture it broke.
constexpr CUresult kStreamCaptureUnsupported = 900;
constexpr CUresult kStreamCaptureInvalidated = 901;

// CUdevice_attribute values.
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

// cuPointerGetAttribute: what memory a pointer addresses (a CUmemorytype, 2: device memory),
// and the GPU it lives on.
constexpr int kPointerAttributeMemoryType = 2;
constexpr int kPointerAttributeDeviceOrdinal = 9;
constexpr unsigned kMemoryTypeDevice = 2;

// cuEventCreate flag: no timing data, so recording and querying stay cheap.
constexpr unsigned kEventDisableTiming = 2;

// cuStreamCreate flag: the stream does not wait for the legacy default stream.
constexpr unsigned kStreamNonBlocking = 1;
// cuMemHostAlloc flag: the pinned memory is usable from every context.
constexpr unsigned kMemHostAllocPortable = 1;

// CUstreamCaptureMode: relaxed lets this thread and others call anything while a capture
// runs (kiln's own guards keep host reads out of captures, failure_flag.h).
constexpr int kStreamCaptureModeRelaxed = 2;
// CUstreamCaptureStatus.
constexpr int kStreamCaptureStatusNone = 0;
constexpr int kStreamCaptureStatusActive = 1;

// CUjit_option values for cuModuleLoadDataEx: where the PTX compiler writes its messages.
constexpr int kJitInfoLogBuffer = 3;
constexpr int kJitInfoLogBufferSizeBytes = 4;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;

// The driver's entry points kiln calls, resolved by name from the loaded library.
struct Api {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned value, size_t count, CUstream stream);
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned count,
                                 int* options, void** values);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamQuery)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventElapsedTime)(float* milliseconds, CUevent start, CUevent end);
  CUresult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned flags);
  CUresult (*cuMemFreeHost)(void* ptr);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes,
                                   CUstream stream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y,
                             unsigned grid_z, unsigned block_x, unsigned block_y,
                             unsigned block_z, unsigned shared_bytes, CUstream stream,
                             void** params, void** extra);
  // CUDA graphs: capture a stream's work, instantiate it once, launch it as one unit.
  CUresult (*cuStreamBeginCapture_v2)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*cuStreamIsCapturing)(CUstream stream, int* status);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  // Host work in stream order (a host node when captured).
  CUresult (*cuLaunchHostFunc)(CUstream stream, CUhostFn fn, void* data);
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr);
};

// The outcome of loading a driver library: the API when it loaded and cuInit succeeded,
// else why not, in words a user can act on.
struct Loaded {
  std::unique_ptr<Api> api;  // null when unavailable
  std::string library;       // the file name or path that was opened
  int version = 0;           // cuDriverGetVersion: 12040 means 12.4
  int device_count = 0;
  std::string unavailable_reason;
};

// Opens `library` ("libcuda.so.1", found by the dynamic loader, or a path), resolves the
// entry points and runs cuInit. Never throws; the library stays loaded for the process.
Loaded load(const std::string& library);

// The process's driver: KILN_CUDA_DRIVER (a path) when set, else libcuda.so.1. Loaded once.
const Loaded& loaded();

// "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult 999" when the driver cannot name it.
std::string error_name(const Api& api, CUresult result);

// Throws kiln::Error naming the call, its result and `fix` when `result` is not success.
void check(const Api& api, CUresult result, const char* call, const char* fix);

}  // namespace kiln::cuda::driver
