// Where the fake driver's device memory lies (fake_driver.cpp), for the fake libraries that
// work on it (fake_cublaslt.cpp): a device address is the host address of the memory behind
// it plus kDeviceOffset.
#pragma once

#include <cstdint>

namespace kiln::cuda::fake {

// With bit 52 set an address is non-canonical on x86-64 (unmapped, with 5-level paging) and
// outside the user half on AArch64, so a host dereference of device memory faults on both. A
// bit in the top byte (1 << 62, say) would not do: AArch64's top-byte-ignore would let the
// read through to the host memory.
inline constexpr uint64_t kDeviceOffset = uint64_t{1} << 52;

// The host memory behind a device pointer (null stays null).
template <class T>
T* host_address(const void* device) {
  if (!device) return nullptr;
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(device) - kDeviceOffset);
}

}  // namespace kiln::cuda::fake
