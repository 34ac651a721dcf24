// Storage: one buffer shared by a tensor and all its views, with the version counter that
// lets autograd detect in-place writes to tensors it saved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kiln/device.h"

namespace kiln {

class Storage {
 public:
  // Allocates `nbytes` on `device` through its caching allocator.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // Wraps memory kiln does not own; `deleter` (may be empty) runs when the last tensor
  // using it dies.
  static std::shared_ptr<Storage> from_external(void* data, size_t nbytes, Device device,
                                                std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter,
          bool owned);

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void(void*)> deleter_;
  bool owned_;
  uint64_t version_ = 0;
};

}  // namespace kiln
