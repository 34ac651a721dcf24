// What a CUDA test needs, and its skip reason without it. REQUIRE_GPU(): a CUDA device; the
// fake driver (tests/cuda/fake_driver, the ctest cuda_on_fake_driver) counts as one, since it
// runs memory, copies, streams and events. REQUIRE_KERNELS(): a device that runs kernels,
// which only a real GPU does (tests/gpu/device_check.sh).
#pragma once

#include <gtest/gtest.h>

#include "kiln/cuda/device.h"

namespace kiln::cuda {

// The device name tests/cuda/fake_driver reports.
inline constexpr const char* kFakeGpuName = "kiln fake GPU";

inline bool on_fake_driver() {
  return is_available() && get_device_properties(0).name == kFakeGpuName;
}

}  // namespace kiln::cuda

#define REQUIRE_GPU()                                                    \
  do {                                                                   \
    if (!::kiln::cuda::is_available())                                   \
      GTEST_SKIP() << "no CUDA device: " << ::kiln::cuda::unavailable_reason(); \
  } while (0)

#define REQUIRE_KERNELS()                                                                     \
  do {                                                                                        \
    REQUIRE_GPU();                                                                            \
    if (::kiln::cuda::on_fake_driver())                                                       \
      GTEST_SKIP() << "no CUDA device that runs kernels: the fake driver runs memory and copies only"; \
  } while (0)
