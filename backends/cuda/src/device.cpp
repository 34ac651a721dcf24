// The device queries of kiln/cuda/device.h, over the loaded driver (driver.h).
#include "kiln/cuda/device.h"

#include <cstdint>
#include <mutex>

#include "device_context.h"
#include "kiln/cuda/driver.h"
#include "kiln/cuda/graph_capture.h"
#include "kiln/error.h"

namespace kiln::cuda {

bool is_available() {
  return driver::loaded().api != nullptr;
}

int device_count() {
  return driver::loaded().device_count;
}

std::string unavailable_reason() {
  return driver::loaded().unavailable_reason;
}

std::string driver_version() {
  int v = driver::loaded().version;
  if (v == 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

const driver::Api& require_device(int index) {
  const driver::Loaded& d = driver::loaded();
  KILN_CHECK(d.api, "[cuda] no CUDA device: ", d.unavailable_reason);
  KILN_CHECK(index >= 0 && index < d.device_count, "[cuda] expected a device index below ",
             d.device_count, " (the GPUs the driver reports), got ", index,
             ". Fix: pass an index from 0 to kiln::cuda::device_count() - 1.");
  return *d.api;
}

const driver::Api& use_device(int index) {
  const driver::Api& api = require_device(index);
  // One primary context per device, retained once and made current on each calling thread
  // (the runtime API's model, so kiln's work shares memory with libraries that use it).
  thread_local int current = -1;
  if (current == index) return api;
  static driver::CUcontext contexts[64] = {};
  KILN_CHECK(index < 64, "[cuda] kiln supports up to 64 GPUs per process, got index ", index,
             ". Fix: narrow CUDA_VISIBLE_DEVICES.");
  static std::mutex mutex;
  driver::CUcontext context;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!contexts[index]) {
      driver::CUdevice device;
      driver::check(api, api.cuDeviceGet(&device, index), "cuDeviceGet", "check nvidia-smi.");
      driver::check(api, api.cuDevicePrimaryCtxRetain(&contexts[index], device),
                    "cuDevicePrimaryCtxRetain",
                    "check nvidia-smi; the GPU may be in exclusive-process mode and in use.");
    }
    context = contexts[index];
  }
  driver::check(api, api.cuCtxSetCurrent(context), "cuCtxSetCurrent", "check nvidia-smi.");
  current = index;
  return api;
}

DeviceProperties get_device_properties(int index) {
  const driver::Api& api = require_device(index);
  driver::CUdevice device;
  driver::check(api, api.cuDeviceGet(&device, index), "cuDeviceGet", "check nvidia-smi.");
  DeviceProperties p;
  char name[256] = {};
  driver::check(api, api.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName",
                "check nvidia-smi.");
  p.name = name;
  auto attribute = [&](int which) {
    int value = 0;
    driver::check(api, api.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute",
                  "check nvidia-smi.");
    return value;
  };
  p.major = attribute(driver::kAttrComputeCapabilityMajor);
  p.minor = attribute(driver::kAttrComputeCapabilityMinor);
  p.multiprocessors = attribute(driver::kAttrMultiprocessorCount);
  driver::check(api, api.cuDeviceTotalMem_v2(&p.total_memory, device), "cuDeviceTotalMem",
                "check nvidia-smi.");
  return p;
}

void synchronize(int index) {
  fail_if_capturing(index, "synchronize()");
  const driver::Api& api = use_device(index);
  driver::check(api, api.cuCtxSynchronize(), "cuCtxSynchronize",
                "an earlier kernel failed; rerun with CUDA_LAUNCH_BLOCKING=1 to find it.");
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes, int index) {
  fail_if_capturing(index, "a synchronous copy from the host");
  const driver::Api& api = use_device(index);
  driver::check(api,
                api.cuMemcpyHtoD_v2(
                    static_cast<driver::CUdeviceptr>(reinterpret_cast<uintptr_t>(device_dst)),
                    host_src, bytes),
                "cuMemcpyHtoD", "check that the destination is memory of this GPU.");
}

int device_of_pointer(const void* ptr) {
  const driver::Api& api = use_device(0);
  const auto address = static_cast<driver::CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  unsigned type = 0;
  if (api.cuPointerGetAttribute(&type, driver::kPointerAttributeMemoryType, address) !=
          driver::kSuccess ||
      type != driver::kMemoryTypeDevice)
    return -1;
  int ordinal = -1;
  if (api.cuPointerGetAttribute(&ordinal, driver::kPointerAttributeDeviceOrdinal, address) !=
      driver::kSuccess)
    return -1;
  return ordinal;
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes, int index) {
  fail_if_capturing(index, "a copy to the host");
  const driver::Api& api = use_device(index);
  driver::check(api,
                api.cuMemcpyDtoH_v2(
                    host_dst, static_cast<driver::CUdeviceptr>(reinterpret_cast<uintptr_t>(device_src)),
                    bytes),
                "cuMemcpyDtoH",
                "check that the source is memory of this GPU; an earlier kernel may have failed "
                "(rerun with CUDA_LAUNCH_BLOCKING=1 to find it).");
}

}  // namespace kiln::cuda
