// Loading PTX modules and launching their kernels through the driver (fused_kernels.h), and
// the launch geometry, which is plain arithmetic tested without a GPU.
#include "kiln/cuda/fused_kernels.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "device_context.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/driver.h"
#include "kiln/cuda/stream.h"
#include "kiln/error.h"

namespace kiln::cuda {
namespace {

// Enough resident blocks to hide memory latency: an H100/H200 SM holds 2048 threads, eight
// 256-thread blocks. More blocks than this only add scheduling; the grid-stride loops cover
// any size with these.
constexpr int64_t kBlocksPerMultiprocessor = 8;
constexpr int64_t kElementwiseBlock = 256;
constexpr int64_t kWarp = 32;
constexpr int64_t kMaxBlock = 1024;

}  // namespace

LaunchGeometry launch_geometry(const FusedKernelInfo& kernel, std::span<const int64_t> dims,
                               int multiprocessors) {
  KILN_CHECK(dims.size() == kernel.dims, "[cuda] kernel '", kernel.name, "': expected ",
             kernel.dims, " iteration dims to launch it over, found ", dims.size(),
             ". Fix: pass every dim of its spec (static ones too).");
  KILN_CHECK(multiprocessors > 0, "[cuda] kernel '", kernel.name,
             "': expected the GPU's multiprocessor count, found ", multiprocessors,
             ". Fix: pass DeviceProperties::multiprocessors.");
  for (int64_t d : dims)
    KILN_CHECK(d >= 0, "[cuda] kernel '", kernel.name,
               "': expected every iteration dim known and non-negative, found ", d,
               ". Fix: pass the run-time size of each dim.");
  const int64_t most_blocks = kBlocksPerMultiprocessor * multiprocessors;
  LaunchGeometry g;
  if (kernel.kind == FusedKernelKind::Elementwise) {
    int64_t elements = 1;
    for (int64_t d : dims) elements *= d;
    g.block = kElementwiseBlock;
    g.grid = std::clamp<int64_t>((elements + g.block - 1) / g.block, 1, most_blocks);
    return g;
  }
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
  const int64_t row = dims.empty() ? 1 : dims.back();
  g.block = std::clamp<int64_t>((row + kWarp - 1) / kWarp * kWarp, kWarp, kMaxBlock);
  g.grid = std::clamp<int64_t>(rows, 1, most_blocks);
  return g;
}

struct FusedKernelModule::Loaded {
  driver::CUmodule module = nullptr;
  std::vector<driver::CUfunction> functions;  // in the order of kernels_
};

FusedKernelModule::FusedKernelModule(const std::string& ptx, std::vector<FusedKernelInfo> kernels,
                                     int device)
    : loaded_(std::make_unique<Loaded>()), kernels_(std::move(kernels)), device_(device) {
  const driver::Api& api = use_device(device);
  multiprocessors_ = get_device_properties(device).multiprocessors;
  // The driver's PTX compiler writes what it rejects into these.
  std::vector<char> error_log(16384, '\0'), info_log(16384, '\0');
  int options[] = {driver::kJitErrorLogBuffer, driver::kJitErrorLogBufferSizeBytes,
                   driver::kJitInfoLogBuffer, driver::kJitInfoLogBufferSizeBytes};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(error_log.size() - 1),
                    info_log.data(), reinterpret_cast<void*>(info_log.size() - 1)};
  driver::CUresult r = api.cuModuleLoadDataEx(&loaded_->module, ptx.c_str(), 4, options, values);
  KILN_CHECK(r == driver::kSuccess, "[cuda] expected the driver to load the PTX module on GPU ",
             device, " (", get_device_properties(device).name, "), got ",
             driver::error_name(api, r), ":\n", error_log.data(),
             "\nFix: generate the PTX for this GPU's architecture or an older one (the code "
             "generator's PtxOptions::chip; NVRTC's follows the GPU), and use a driver at least "
             "as new as the CUDA toolkit that made it.");
  for (const FusedKernelInfo& k : kernels_) {
    driver::CUfunction f = nullptr;
    driver::CUresult found = api.cuModuleGetFunction(&f, loaded_->module, k.name.c_str());
    KILN_CHECK(found == driver::kSuccess, "[cuda] expected a kernel named '", k.name,
               "' in the PTX module, got ", driver::error_name(api, found),
               ". Fix: pass the kernels the module was generated with.");
    loaded_->functions.push_back(f);
  }
}

FusedKernelModule::~FusedKernelModule() {
  if (!loaded_ || !loaded_->module) return;
  const driver::Api& api = use_device(device_);
  api.cuModuleUnload(loaded_->module);  // nothing to do about a failure while unloading
}

const FusedKernelInfo& FusedKernelModule::kernel(const std::string& name) const {
  std::string names;
  for (const FusedKernelInfo& k : kernels_) {
    if (k.name == name) return k;
    names += (names.empty() ? "" : ", ") + k.name;
  }
  KILN_FAIL("[cuda] expected a kernel named '", name, "' in the module, found only: ",
            names.empty() ? "none" : names, ".");
}

void FusedKernelModule::launch(const std::string& name, std::span<void* const> buffers,
                               std::span<const int64_t> dims) const {
  const FusedKernelInfo& k = kernel(name);
  KILN_CHECK(buffers.size() == k.buffers, "[cuda] kernel '", name, "': expected ", k.buffers,
             " device buffers (its inputs, then its outputs), found ", buffers.size(), ".");
  for (size_t i = 0; i < buffers.size(); ++i)
    KILN_CHECK(buffers[i] != nullptr, "[cuda] kernel '", name, "': buffer ", i,
               " is null. Fix: pass device memory for every input and output.");
  LaunchGeometry g = launch_geometry(k, dims, multiprocessors_);
  // The parameters in order, each passed by its address.
  std::vector<void*> pointers(buffers.begin(), buffers.end());
  std::vector<int64_t> sizes(dims.begin(), dims.end());
  std::vector<void*> params;
  for (void*& p : pointers) params.push_back(&p);
  for (int64_t& d : sizes) params.push_back(&d);
  launch_with(name, g, params.data());
}

namespace {
thread_local LaunchCounts launched;
}  // namespace

LaunchCounts launches_on_this_thread() { return launched; }

void detail::count_library_call() { ++launched.library_calls; }
void detail::count_graph_launch() { ++launched.graphs; }
void detail::count_copy() { ++launched.copies; }

void FusedKernelModule::launch_with(const std::string& name, LaunchGeometry geometry,
                                    void** params) const {
  ++launched.kernels;
  const FusedKernelInfo& k = kernel(name);
  const driver::Api& api = use_device(device_);
  const size_t index = static_cast<size_t>(&k - kernels_.data());
  driver::check(api,
                api.cuLaunchKernel(loaded_->functions[index], static_cast<unsigned>(geometry.grid),
                                   1, 1, static_cast<unsigned>(geometry.block), 1, 1, 0,
                                   static_cast<driver::CUstream>(current_stream(device_).handle()),
                                   params, nullptr),
                "cuLaunchKernel",
                "an earlier kernel may have failed (rerun with CUDA_LAUNCH_BLOCKING=1 to find "
                "it); check the kernel's buffers are memory of this GPU.");
}

}  // namespace kiln::cuda
