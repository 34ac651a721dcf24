// Storage allocation and release through the device's allocator (the CPU's own, or the
// registered device interface's).
#include "kiln/storage.h"

#include "kiln/allocator.h"
#include "kiln/device_interface.h"
#include "kiln/error.h"

namespace kiln {

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter,
                 bool owned)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), owned_(owned) {}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  void* p = device.is_cpu() ? CpuAllocator::instance().allocate(nbytes)
                            : device_interface(device).allocate(nbytes, device);
  return std::make_shared<Storage>(p, nbytes, device, nullptr, true);
}

std::shared_ptr<Storage> Storage::from_external(void* data, size_t nbytes, Device device,
                                                std::function<void(void*)> deleter) {
  return std::make_shared<Storage>(data, nbytes, device, std::move(deleter), false);
}

Storage::~Storage() {
  if (owned_ && device_.is_cpu()) {
    CpuAllocator::instance().deallocate(data_, nbytes_);
  } else if (owned_) {
    device_interface(device_).deallocate(data_, device_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace kiln
