// What a CUDA test needs, and its skip reason without it. REQUIRE_GPU(): a CUDA device; the
// fake driver (tests/cuda/fake_driver, the ctest cuda_on_fake_driver) counts as one, since it
// runs memory, copies, streams and events. REQUIRE_KERNELS(): a device that runs kiln's
// generated kernels: a real GPU (tests/gpu/device_check.sh), or the fake driver with the
// fake NVRTC, which builds them on the host (the ctest cuda_on_fake_driver). REQUIRE_PTX(): a
// GPU that loads PTX itself (hand-written, or the code generator's): a real one only.
#pragma once

#include <gtest/gtest.h>

#include "kiln/cuda/device.h"
#include "kiln/cuda/nvrtc.h"

namespace kiln::cuda {

// The device name tests/cuda/fake_driver reports.
inline constexpr const char* kFakeGpuName = "kiln fake GPU";

inline bool on_fake_driver() {
  return is_available() && get_device_properties(0).name == kFakeGpuName;
}

// The fake NVRTC reports version 0.0 (tests/cuda/fake_driver/fake_nvrtc.cpp).
inline bool kernels_run_on_fake_driver() { return nvrtc::available() && nvrtc::version() == "0.0"; }

}  // namespace kiln::cuda

#define REQUIRE_GPU()                                                    \
  do {                                                                   \
    if (!::kiln::cuda::is_available())                                   \
      GTEST_SKIP() << "no CUDA device: " << ::kiln::cuda::unavailable_reason(); \
  } while (0)

#define REQUIRE_KERNELS()                                                                     \
  do {                                                                                        \
    REQUIRE_GPU();                                                                            \
    if (::kiln::cuda::on_fake_driver() && !::kiln::cuda::kernels_run_on_fake_driver())        \
      GTEST_SKIP() << "no CUDA device that runs kernels: the fake driver runs them only with the fake NVRTC (KILN_NVRTC)"; \
  } while (0)

#define REQUIRE_PTX()                                                                        \
  do {                                                                                       \
    REQUIRE_GPU();                                                                           \
    if (::kiln::cuda::on_fake_driver())                                                      \
      GTEST_SKIP() << "no CUDA device that loads PTX: the fake driver runs only kernels the fake NVRTC built"; \
  } while (0)
