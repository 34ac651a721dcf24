// Storage allocation and release through the device's allocator.
#include "kiln/storage.h"

#include "kiln/allocator.h"
#include "kiln/error.h"

namespace kiln {

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter,
                 bool owned)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), owned_(owned) {}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  KILN_CHECK(device.is_cpu(), "Storage::allocate: no allocator for device ", device,
             " in this build (only cpu kernels exist yet). Fix: keep tensors on the cpu.");
  void* p = CpuAllocator::instance().allocate(nbytes);
  return std::make_shared<Storage>(p, nbytes, device, nullptr, true);
}

std::shared_ptr<Storage> Storage::from_external(void* data, size_t nbytes, Device device,
                                                std::function<void(void*)> deleter) {
  return std::make_shared<Storage>(data, nbytes, device, std::move(deleter), false);
}

Storage::~Storage() {
  if (owned_) {
    CpuAllocator::instance().deallocate(data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace kiln
