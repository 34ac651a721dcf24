// Finding the NVIDIA driver and the GPUs, in every build and on every machine: each way the
// driver can be missing gives a reason that names what was looked for, and the device
// queries either describe the GPU or throw that reason. Tests that need a GPU skip with
// "no CUDA device" on machines without one (tests/gpu/device_check.sh runs them on one).
#include "kiln/cuda/device.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/driver.h"
#include "kiln/cuda/stream.h"
#include "kiln/error.h"

namespace kiln::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaDriver, AMissingLibraryNamesItAndSaysTheDriverIsNotTheToolkit) {
  driver::Loaded d = driver::load("/nonexistent/libcuda.so.1");
  EXPECT_EQ(d.api, nullptr);
  EXPECT_EQ(d.device_count, 0);
  EXPECT_TRUE(contains(d.unavailable_reason, "/nonexistent/libcuda.so.1")) << d.unavailable_reason;
  EXPECT_TRUE(contains(d.unavailable_reason,
                       "comes with the NVIDIA driver, not with the CUDA "
                       "toolkit"))
      << d.unavailable_reason;
  EXPECT_TRUE(contains(d.unavailable_reason, "KILN_CUDA_DRIVER")) << d.unavailable_reason;
}

TEST(CudaDriver, ALibraryWithoutTheDriverApiIsRefusedByTheFirstMissingEntryPoint) {
  driver::Loaded d = driver::load("libm.so.6");
  EXPECT_EQ(d.api, nullptr);
  EXPECT_TRUE(contains(d.unavailable_reason, "libm.so.6 has no cuInit")) << d.unavailable_reason;
}

TEST(CudaDriver, TheToolkitsStubLibraryIsRecognized) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  driver::Loaded d = driver::load(stub);
  EXPECT_EQ(d.api, nullptr);
  EXPECT_TRUE(contains(d.unavailable_reason, "stub library")) << d.unavailable_reason;
  EXPECT_TRUE(contains(d.unavailable_reason, "no NVIDIA driver")) << d.unavailable_reason;
}

TEST(CudaDevice, AvailabilityAndTheReasonAgree) {
  EXPECT_EQ(is_available(), unavailable_reason().empty()) << unavailable_reason();
  EXPECT_EQ(is_available(), device_count() > 0);
  EXPECT_EQ(is_available(), !driver_version().empty());
}

TEST(CudaDevice, NamesGpusAsDevices) {
  EXPECT_EQ(device(), kCUDA);
  EXPECT_EQ(device(1).str(), "cuda:1");
  EXPECT_EQ(Device("cuda:1"), device(1));
}

TEST(CudaDevice, WithoutAGpuEveryQueryThrowsTheReason) {
  if (is_available()) GTEST_SKIP() << "a CUDA device is present";
  for (auto query : {+[] { get_device_properties(0); }, +[] { synchronize(0); },
                     +[] { memory_stats(0); }, +[] { empty_cache(0); }}) {
    try {
      query();
      FAIL() << "expected kiln::Error";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "no CUDA device: " + unavailable_reason())) << e.what();
    }
  }
}

// ---- with a GPU ----

TEST(CudaDevice, DescribesEachGpu) {
  if (!is_available()) GTEST_SKIP() << "no CUDA device: " << unavailable_reason();
  for (int i = 0; i < device_count(); ++i) {
    DeviceProperties p = get_device_properties(i);
    EXPECT_FALSE(p.name.empty());
    EXPECT_GE(p.major, 5) << p.name;
    EXPECT_GT(p.multiprocessors, 0) << p.name;
    EXPECT_GT(p.total_memory, size_t{1} << 30) << p.name;
  }
  EXPECT_THROW(get_device_properties(device_count()), Error);
  synchronize(0);
}

TEST(CudaDevice, TheDeviceAllocatorCachesRealDeviceMemory) {
  if (!is_available()) GTEST_SKIP() << "no CUDA device: " << unavailable_reason();
  CachingAllocator& a = device_allocator(0);
  AllocatorStats before = a.stats();
  void* p = a.allocate(3 << 20, /*stream=*/0);
  ASSERT_NE(p, nullptr);
  a.deallocate(p);
  void* q = a.allocate(3 << 20, 0);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().cache_hits, before.cache_hits + 1);
  a.deallocate(q);
  empty_cache(0);
  EXPECT_EQ(memory_stats(0).cached_bytes, 0u);
  // A request no GPU can hold: the out-of-memory message, not a crash.
  try {
    a.allocate(size_t{1} << 50, 0);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "out of memory on cuda:0")) << e.what();
  }
}

// kiln_rt checks a caller's pointers with it: device memory names its GPU, host memory
// (plain or pinned) and addresses the driver never saw are -1.
TEST(CudaDevice, TellsDeviceMemoryFromHostMemory) {
  if (!is_available()) GTEST_SKIP() << "no CUDA device: " << unavailable_reason();
  CachingAllocator& a = device_allocator(0);
  void* on_gpu = a.allocate(4096, /*stream=*/0);
  EXPECT_EQ(device_of_pointer(on_gpu), 0);
  EXPECT_EQ(device_of_pointer(static_cast<char*>(on_gpu) + 128), 0);  // inside it
  a.deallocate(on_gpu);
  std::vector<float> host(64);
  EXPECT_EQ(device_of_pointer(host.data()), -1);
  PinnedBuffer pinned(256);
  EXPECT_EQ(device_of_pointer(pinned.data()), -1);
}

}  // namespace
}  // namespace kiln::cuda
