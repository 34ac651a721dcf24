// Generated kernels on a GPU (kiln/cuda/fused_kernels.h): the launch geometry, which is plain
// arithmetic; the module's errors; and, on a GPU, every kernel of the bundle the code
// generator's tests write (tests/cuda/kernel_bundle.h) run and compared with the CPU's results.
// Without a GPU the module tests skip with "no CUDA device"; without a bundle the bundle test
// skips naming KILN_GPU_KERNEL_BUNDLE (tests/gpu/device_check.sh sets it).
#include "kiln/cuda/fused_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda/kernel_bundle.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/stream.h"
#include "kiln/error.h"
#include "kiln/kiln.h"
#include "kiln/serialize/safetensors.h"
#include "kiln/tensor.h"
#include "cuda/requirements.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

// ---- launch geometry ----


TEST(CudaFusedKernels, ElementwiseLaunchFillsTheGpuAndStridesOverTheRest) {
  FusedKernelInfo k{"k", FusedKernelKind::Elementwise, 2, 2};
  const std::vector<int64_t> small = {3, 5}, large = {1 << 20, 256};
  LaunchGeometry g = launch_geometry(k, small, 132);
  EXPECT_EQ(g.block, 256);
  EXPECT_EQ(g.grid, 1);
  g = launch_geometry(k, large, 132);
  EXPECT_EQ(g.block, 256);
  EXPECT_EQ(g.grid, 8 * 132);
  const std::vector<int64_t> empty = {0, 7};
  EXPECT_EQ(launch_geometry(k, empty, 132).grid, 1);
}

TEST(CudaFusedKernels, RowLaunchGivesEachRowABlockOfWholeWarps) {
  FusedKernelInfo k{"k", FusedKernelKind::Rows, 2, 3};
  const std::vector<int64_t> narrow = {2, 3, 5}, wide = {16384, 1, 4096}, mid = {4, 1, 100};
  LaunchGeometry g = launch_geometry(k, narrow, 132);
  EXPECT_EQ(g.block, 32);
  EXPECT_EQ(g.grid, 6);
  g = launch_geometry(k, wide, 132);
  EXPECT_EQ(g.block, 1024);
  EXPECT_EQ(g.grid, 8 * 132);
  EXPECT_EQ(launch_geometry(k, mid, 132).block, 128);
}

TEST(CudaFusedKernels, LaunchGeometryRejectsWrongDims) {
  FusedKernelInfo k{"fused_3", FusedKernelKind::Elementwise, 2, 2};
  const std::vector<int64_t> one = {5}, negative = {5, -1}, ok = {5, 5};
  expect_error([&] { launch_geometry(k, one, 132); },
               {"kernel 'fused_3': expected 2 iteration dims to launch it over, found 1"});
  expect_error([&] { launch_geometry(k, negative, 132); },
               {"expected every iteration dim known and non-negative, found -1"});
  expect_error([&] { launch_geometry(k, ok, 0); },
               {"expected the GPU's multiprocessor count, found 0"});
}

// ---- the module ----

TEST(CudaFusedKernels, WithoutAGpuLoadingSaysWhy) {
  if (is_available()) GTEST_SKIP() << "a GPU is here: the other tests load modules";
  expect_error([] { FusedKernelModule m(".version 7.8\n", {}); },
               {"[cuda] no CUDA device: ", unavailable_reason()});
}

TEST(CudaFusedKernels, BadPtxIsRefusedWithTheDriversLog) {
  REQUIRE_PTX();
  expect_error(
      [] { FusedKernelModule m(".version 7.8\n.target sm_90\n.address_size 64\nnot ptx\n", {}); },
      {"[cuda] expected the driver to load the PTX module on GPU 0", "CUDA_ERROR_INVALID_PTX",
       "Fix: generate the PTX for this GPU's architecture"});
}

// An empty kernel of the generated kernels' parameters: one buffer, one dim.
constexpr const char* kEmptyKernel = R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry empty(.param .u64 p0, .param .u64 p1) { ret; }
)";

TEST(CudaFusedKernels, MissingKernelsAndWrongLaunchesAreRefused) {
  REQUIRE_PTX();
  expect_error([] { FusedKernelModule m(kEmptyKernel, {{"absent", FusedKernelKind::Elementwise, 1, 1}}); },
               {"expected a kernel named 'absent' in the PTX module, got CUDA_ERROR_NOT_FOUND"});
  FusedKernelModule m(kEmptyKernel, {{"empty", FusedKernelKind::Elementwise, 1, 1}});
  std::vector<void*> none, null_buffer = {nullptr};
  const std::vector<int64_t> dims = {4};
  expect_error([&] { m.launch("other", none, dims); },
               {"expected a kernel named 'other' in the module, found only: empty"});
  expect_error([&] { m.launch("empty", none, dims); },
               {"kernel 'empty': expected 1 device buffers (its inputs, then its outputs), found 0"});
  expect_error([&] { m.launch("empty", null_buffer, dims); }, {"kernel 'empty': buffer 0 is null"});
  void* buffer = device_allocator(0).allocate(16, 0);
  std::vector<void*> one = {buffer};
  m.launch("empty", one, dims);
  synchronize(0);
  device_allocator(0).deallocate(buffer);
}

// ---- the code generator's kernels on the GPU ----

// Device memory of kiln's allocator for one tensor's bytes, freed at the end of the scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : ptr_(device_allocator(0).allocate(bytes == 0 ? 1 : bytes, 0)) {}
  ~DeviceBuffer() { device_allocator(0).deallocate(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_;
};

// One bundled kernel's tensors: its inputs, then the CPU's results.
std::vector<Tensor> bundled_tensors(const SafetensorsFile& bundle, const testing::BundledKernel& k) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < k.info.buffers; ++i) {
    const bool input = i < k.inputs;
    std::string name =
        k.info.name + (input ? ".in" + std::to_string(i) : ".out" + std::to_string(i - k.inputs));
    const Tensor* t = bundle.find(name);
    KILN_CHECK(t != nullptr, "[gpu bundle] expected tensor '", name, "' for kernel '", k.info.name,
               "', found none. Fix: rewrite the bundle with tests/gpu/prepare.sh.");
    out.push_back(*t);
  }
  return out;
}

TEST(CudaFusedKernels, GeneratedKernelsMatchTheCpuOnTheGpu) {
  const char* path = std::getenv("KILN_GPU_KERNEL_BUNDLE");
  if (!path || !*path)
    GTEST_SKIP() << "no kernel bundle: set KILN_GPU_KERNEL_BUNDLE to the file tests/gpu/prepare.sh "
                    "writes (tests/gpu/device_check.sh does)";
  // The bundle is read and checked whole first, so a bad one shows without a GPU too.
  SafetensorsFile bundle = load_safetensors(path);
  std::vector<testing::BundledKernel> kernels =
      testing::parse_bundle_lines(bundle.metadata.at("kernels"));
  ASSERT_FALSE(kernels.empty());
  std::vector<FusedKernelInfo> infos;
  std::vector<std::vector<Tensor>> hosts;
  for (const testing::BundledKernel& k : kernels) {
    infos.push_back(k.info);
    hosts.push_back(bundled_tensors(bundle, k));
  }
  REQUIRE_PTX();
  DeviceProperties props = get_device_properties(0);
  FusedKernelModule module(bundle.metadata.at("ptx"), infos);
  int failed_kernels = 0;
  for (size_t n = 0; n < kernels.size(); ++n) {
    const testing::BundledKernel& k = kernels[n];
    const std::vector<Tensor>& host = hosts[n];
    std::vector<std::unique_ptr<DeviceBuffer>> device;
    std::vector<void*> pointers;
    for (size_t i = 0; i < host.size(); ++i) {
      device.push_back(std::make_unique<DeviceBuffer>(host[i].nbytes()));
      pointers.push_back(device.back()->get());
      if (i < k.inputs) copy_to_device(pointers.back(), host[i].raw_data(), host[i].nbytes());
    }
    module.launch(k.info.name, pointers, k.dims);
    int bad = 0;
    for (size_t o = k.inputs; o < host.size(); ++o) {
      const Tensor& want = host[o];
      Tensor got = Tensor::empty(want.sizes(), want.dtype());
      copy_to_host(got.raw_data(), pointers[o], want.nbytes());
      bad += count_mismatches(got.to_vector<double>(), want.to_vector<double>(), k.rtol, k.atol,
                              k.info.name + " output " + std::to_string(o - k.inputs), 3);
    }
    failed_kernels += bad > 0;
  }
  std::printf("[gpu] %zu generated kernels (%s, PTX for %s) on %s: %d differ from the CPU\n",
              kernels.size(), path, bundle.metadata.at("chip").c_str(), props.name.c_str(),
              failed_kernels);
}

// The issue's first target, measured in one run: relu(x * a + b) * c - d over 256M float32
// (1 GiB read, 1 GiB written) against a device-to-device copy of the same bytes. Printed as a
// ratio; tests/gpu/device_check.sh collects it (docs/perf.md has the figures).
TEST(CudaFusedKernels, FusedChainBandwidthAgainstADeviceCopy) {
  const char* path = std::getenv("KILN_GPU_KERNEL_BUNDLE");
  if (!path || !*path)
    GTEST_SKIP() << "no kernel bundle: set KILN_GPU_KERNEL_BUNDLE (tests/gpu/device_check.sh does)";
  SafetensorsFile bundle = load_safetensors(path);
  const std::string chain = bundle.metadata.at("chain");
  std::vector<FusedKernelInfo> infos;
  for (const testing::BundledKernel& k : testing::parse_bundle_lines(bundle.metadata.at("kernels")))
    if (k.info.name == chain) infos.push_back(k.info);
  ASSERT_EQ(infos.size(), 1u) << "the bundle names '" << chain << "' as its chain kernel";
  REQUIRE_PTX();
  FusedKernelModule module(bundle.metadata.at("ptx"), infos);
  const int64_t n = int64_t{1} << 28;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  DeviceBuffer x(bytes), out(bytes), a(4), b(4), c(4), d(4);
  const Stream stream = current_stream(0);
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  fill_words_async(x.get(), bits(1.5f), static_cast<size_t>(n), stream);
  fill_words_async(a.get(), bits(0.5f), 1, stream);
  fill_words_async(b.get(), bits(0.5f), 1, stream);
  fill_words_async(c.get(), bits(0.5f), 1, stream);
  fill_words_async(d.get(), bits(0.5f), 1, stream);
  std::vector<void*> buffers = {x.get(), a.get(), b.get(), c.get(), d.get(), out.get()};
  const std::vector<int64_t> dims = {n};
  auto time_ms = [&](auto&& work) {
    work();  // warm
    Event start(true), end(true);
    start.record(stream);
    const int repeats = 10;
    for (int r = 0; r < repeats; ++r) work();
    end.record(stream);
    end.synchronize();
    return start.elapsed_ms(end) / repeats;
  };
  const double kernel_ms = time_ms([&] { module.launch(chain, buffers, dims); });
  float probe[4] = {};
  copy_to_host(probe, static_cast<char*>(out.get()) + bytes - sizeof(probe), sizeof(probe));
  for (float v : probe) EXPECT_FLOAT_EQ(v, 0.125f);  // relu(1.5 * 0.5 + 0.5) * 0.5 - 0.5
  const double copy_ms = time_ms([&] { copy_on_device_async(out.get(), x.get(), bytes, stream); });
  // The same chain in kiln eager: four elementwise kernels, the numbers kernel parameters.
  const Tensor eager_x = full({n}, 1.5, TensorOptions(kFloat32).with_device(Device(DeviceType::CUDA, 0)));
  Tensor eager_out;
  const double eager_ms = time_ms([&] { eager_out = kiln::relu(eager_x * 0.5f + 0.5f) * 0.5f - 0.5f; });
  EXPECT_FLOAT_EQ(eager_out.narrow(0, n - 1, 1).item<float>(), 0.125f);
  const double moved = 2.0 * static_cast<double>(bytes);  // read + write
  std::printf("[gpu] relu(x*a+b)*c-d on 256M float32: %.3f ms, %.0f GB/s; device copy %.3f ms, "
              "%.0f GB/s; fused / copy bandwidth %.2f (target >= 0.80); kiln eager %.3f ms, fused / "
              "eager speed %.2f (target >= 3)\n",
              kernel_ms, moved / (kernel_ms * 1e6), copy_ms, moved / (copy_ms * 1e6),
              copy_ms / kernel_ms, eager_ms, eager_ms / kernel_ms);
}

}  // namespace
}  // namespace kiln::cuda
