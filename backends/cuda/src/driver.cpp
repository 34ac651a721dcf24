// Loading the CUDA driver with dlopen: resolve every entry point first, then cuInit, and
// turn each way this can fail into a reason that names what was looked for.
#include "kiln/cuda/driver.h"

#include <dlfcn.h>

#include <cstdlib>

#include "kiln/error.h"

namespace kiln::cuda::driver {

namespace {

// Resolves one entry point into `slot`; false (and the reason) when the library lacks it.
template <class Fn>
bool resolve(void* handle, const char* name, Fn& slot, const std::string& library,
             std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot) return true;
  reason = library + " has no " + name +
           ": it is not a CUDA driver library, or one older "
           "than CUDA 11. Fix: install a current NVIDIA driver, or point KILN_CUDA_DRIVER at "
           "its libcuda.so.1.";
  return false;
}

bool resolve_all(void* handle, Api& api, const std::string& library, std::string& reason) {
#define KILN_RESOLVE(name) resolve(handle, #name, api.name, library, reason)
  return KILN_RESOLVE(cuInit) && KILN_RESOLVE(cuDriverGetVersion) && KILN_RESOLVE(cuGetErrorName) &&
         KILN_RESOLVE(cuDeviceGetCount) && KILN_RESOLVE(cuDeviceGet) &&
         KILN_RESOLVE(cuDeviceGetName) && KILN_RESOLVE(cuDeviceGetAttribute) &&
         KILN_RESOLVE(cuDeviceTotalMem_v2) && KILN_RESOLVE(cuDevicePrimaryCtxRetain) &&
         KILN_RESOLVE(cuCtxSetCurrent) && KILN_RESOLVE(cuCtxSynchronize) &&
         KILN_RESOLVE(cuMemAlloc_v2) && KILN_RESOLVE(cuMemFree_v2) &&
         KILN_RESOLVE(cuMemGetInfo_v2) && KILN_RESOLVE(cuEventCreate) &&
         KILN_RESOLVE(cuEventRecord) && KILN_RESOLVE(cuEventQuery) &&
         KILN_RESOLVE(cuEventSynchronize) && KILN_RESOLVE(cuEventDestroy_v2) &&
         KILN_RESOLVE(cuMemcpyHtoD_v2) && KILN_RESOLVE(cuMemcpyDtoH_v2) &&
         KILN_RESOLVE(cuMemcpyDtoDAsync_v2) && KILN_RESOLVE(cuMemsetD32Async) &&
         KILN_RESOLVE(cuModuleLoadDataEx) && KILN_RESOLVE(cuModuleGetFunction) &&
         KILN_RESOLVE(cuModuleUnload) && KILN_RESOLVE(cuLaunchKernel) &&
         KILN_RESOLVE(cuStreamCreate) && KILN_RESOLVE(cuStreamDestroy_v2) &&
         KILN_RESOLVE(cuStreamSynchronize) && KILN_RESOLVE(cuStreamQuery) &&
         KILN_RESOLVE(cuStreamWaitEvent) && KILN_RESOLVE(cuEventElapsedTime) &&
         KILN_RESOLVE(cuMemHostAlloc) && KILN_RESOLVE(cuMemFreeHost) &&
         KILN_RESOLVE(cuMemcpyHtoDAsync_v2) && KILN_RESOLVE(cuMemcpyDtoHAsync_v2) &&
         KILN_RESOLVE(cuStreamBeginCapture_v2) && KILN_RESOLVE(cuStreamEndCapture) &&
         KILN_RESOLVE(cuStreamIsCapturing) && KILN_RESOLVE(cuGraphInstantiateWithFlags) &&
         KILN_RESOLVE(cuGraphLaunch) && KILN_RESOLVE(cuGraphExecDestroy) &&
         KILN_RESOLVE(cuGraphDestroy) && KILN_RESOLVE(cuLaunchHostFunc) &&
         KILN_RESOLVE(cuPointerGetAttribute);
#undef KILN_RESOLVE
}

}  // namespace

std::string error_name(const Api& api, CUresult result) {
  const char* name = nullptr;
  if (api.cuGetErrorName && api.cuGetErrorName(result, &name) == kSuccess && name) return name;
  return "CUresult " + std::to_string(result);
}

void check(const Api& api, CUresult result, const char* call, const char* fix) {
  if (result == kSuccess) return;
  KILN_FAIL("[cuda] ", call, " failed with ", error_name(api, result), ". Fix: ", fix);
}

Loaded load(const std::string& library) {
  Loaded out;
  out.library = library;
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    out.unavailable_reason =
        "the CUDA driver library " + library + " could not be loaded (" +
        (why ? why : "no reason given") +
        "); it comes with the NVIDIA driver, not with the CUDA toolkit. Fix: on a machine "
        "with an NVIDIA GPU, install its driver, or set KILN_CUDA_DRIVER to the path of its "
        "libcuda.so.1.";
    return out;
  }
  auto api = std::make_unique<Api>();
  if (!resolve_all(handle, *api, library, out.unavailable_reason)) return out;

  CUresult init = api->cuInit(0);
  if (init == kStubLibrary) {
    out.unavailable_reason = library +
                             " is the CUDA toolkit's stub library "
                             "(CUDA_ERROR_STUB_LIBRARY), which programs link against but "
                             "which runs nothing: this machine has no NVIDIA driver. Fix: run "
                             "on a machine with an NVIDIA GPU and its driver.";
    return out;
  }
  if (init == kNoDevice) {
    out.unavailable_reason = "the NVIDIA driver (" + library +
                             ") found no GPU "
                             "(cuInit: CUDA_ERROR_NO_DEVICE). Fix: check nvidia-smi, and "
                             "CUDA_VISIBLE_DEVICES if it is set.";
    return out;
  }
  if (init != kSuccess) {
    out.unavailable_reason = "cuInit failed with " + error_name(*api, init) + " (driver " +
                             library +
                             "). Fix: check nvidia-smi; a driver older than the "
                             "CUDA version kiln needs reports CUDA_ERROR_INSUFFICIENT_DRIVER.";
    return out;
  }
  api->cuDriverGetVersion(&out.version);
  int count = 0;
  CUresult counted = api->cuDeviceGetCount(&count);
  if (counted != kSuccess || count <= 0) {
    out.unavailable_reason =
        "the NVIDIA driver (" + library + ") reports no GPU" +
        (counted != kSuccess ? " (cuDeviceGetCount: " + error_name(*api, counted) + ")"
                             : std::string()) +
        ". Fix: check nvidia-smi, and CUDA_VISIBLE_DEVICES if it is set.";
    return out;
  }
  out.device_count = count;
  out.api = std::move(api);
  return out;
}

const Loaded& loaded() {
  static const Loaded* driver = [] {
    const char* path = std::getenv("KILN_CUDA_DRIVER");
    return new Loaded(load(path && *path ? path : "libcuda.so.1"));  // leaked: used until exit
  }();
  return *driver;
}

}  // namespace kiln::cuda::driver
