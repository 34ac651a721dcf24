// The caching allocator over the real driver: one DriverMemory and one CachingAllocator per
// GPU, made on first use and kept until the process exits (tensors may outlive main).
#include <array>
#include <memory>
#include <mutex>

#include "device_context.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/driver.h"
#include "kiln/error.h"

namespace kiln::cuda {

namespace {

constexpr int kMaxDevices = 64;

class DriverMemory final : public DeviceMemory {
 public:
  explicit DriverMemory(int index) : index_(index) {}

  void* allocate(size_t bytes) override {
    const driver::Api& api = use_device(index_);
    driver::CUdeviceptr ptr = 0;
    driver::CUresult r = api.cuMemAlloc_v2(&ptr, bytes);
    if (r == driver::kOutOfMemory) return nullptr;
    driver::check(api, r, "cuMemAlloc", "check nvidia-smi; an earlier kernel may have failed.");
    return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  }
  void release(void* ptr) override {
    const driver::Api& api = use_device(index_);
    driver::check(
        api, api.cuMemFree_v2(static_cast<driver::CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr))),
        "cuMemFree", "check nvidia-smi; an earlier kernel may have failed.");
  }
  size_t free_bytes() override {
    const driver::Api& api = use_device(index_);
    size_t free = 0, total = 0;
    if (api.cuMemGetInfo_v2(&free, &total) != driver::kSuccess) return 0;
    return free;
  }
  Event record_event(StreamId stream) override {
    const driver::Api& api = use_device(index_);
    driver::CUevent event = nullptr;
    driver::check(api, api.cuEventCreate(&event, driver::kEventDisableTiming), "cuEventCreate",
                  "check nvidia-smi.");
    driver::check(api, api.cuEventRecord(event, reinterpret_cast<driver::CUstream>(stream)),
                  "cuEventRecord", "check nvidia-smi; an earlier kernel may have failed.");
    return reinterpret_cast<Event>(event);
  }
  bool event_done(Event event) override {
    const driver::Api& api = use_device(index_);
    driver::CUresult r = api.cuEventQuery(reinterpret_cast<driver::CUevent>(event));
    if (r == driver::kNotReady) return false;
    driver::check(api, r, "cuEventQuery",
                  "an earlier kernel failed; rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to find it.");
    return true;
  }
  void wait_event(Event event) override {
    const driver::Api& api = use_device(index_);
    driver::check(api, api.cuEventSynchronize(reinterpret_cast<driver::CUevent>(event)),
                  "cuEventSynchronize",
                  "an earlier kernel failed; rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to find it.");
  }
  void release_event(Event event) override {
    const driver::Api& api = use_device(index_);
    api.cuEventDestroy_v2(reinterpret_cast<driver::CUevent>(event));
  }

 private:
  int index_;
};

struct PerDevice {
  std::unique_ptr<DriverMemory> memory;
  std::unique_ptr<CachingAllocator> allocator;
};

}  // namespace

CachingAllocator& device_allocator(int index) {
  require_device(index);
  KILN_CHECK(index < kMaxDevices, "[cuda] kiln supports up to ", kMaxDevices,
             " GPUs per process, got index ", index, ". Fix: narrow CUDA_VISIBLE_DEVICES.");
  static auto* devices = new std::array<PerDevice, kMaxDevices>();  // leaked: see above
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  PerDevice& d = (*devices)[static_cast<size_t>(index)];
  if (!d.allocator) {
    d.memory = std::make_unique<DriverMemory>(index);
    d.allocator = std::make_unique<CachingAllocator>(*d.memory, "cuda:" + std::to_string(index));
  }
  return *d.allocator;
}

AllocatorStats memory_stats(int index) {
  return device_allocator(index).stats();
}

void empty_cache(int index) {
  device_allocator(index).empty_cache();
}

}  // namespace kiln::cuda
