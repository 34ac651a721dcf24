// The cache of generated eager kernels (kernel_cache.h).
#include "kernel_cache.h"

#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/cuda/device.h"
#include "kiln/cuda/nvrtc.h"

namespace kiln::cuda {

namespace {

// A kernel's name from its key (FNV-1a, in hex): the same kernel gets the same name, and so
// the same source, in every process, whatever order kernels are first used in (a compiler
// cache keyed by the source then finds it).
std::string stable_hash(const std::string& key) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : key) h = (h ^ ch) * 1099511628211ull;
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = digits[h & 15];
  return out;
}

}  // namespace

const GeneratedKernel& generated_kernel(int device, const std::string& key,
                                        const std::string& prefix,
                                        const std::function<std::string(const std::string&)>& make_source) {
  static std::mutex mutex;
  // Leaked: tensors may still run kernels while static objects are destroyed.
  static auto* kernels = new std::unordered_map<std::string, std::unique_ptr<GeneratedKernel>>;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<GeneratedKernel>& slot = (*kernels)[std::to_string(device) + "|" + key];
  if (!slot) {
    auto made = std::make_unique<GeneratedKernel>();
    made->name = prefix + "_" + stable_hash(key);
    const DeviceProperties gpu = get_device_properties(device);
    nvrtc::Options options;
    options.arch = "compute_" + std::to_string(gpu.major) + std::to_string(gpu.minor);
    const std::string ptx = nvrtc::compile_to_ptx(make_source(made->name), made->name + ".cu", options);
    // The kind and counts describe the kernel for FusedKernelModule's checks; generated eager
    // kernels are launched with launch_with and their own parameters.
    made->module = std::make_unique<FusedKernelModule>(
        ptx, std::vector<FusedKernelInfo>{{made->name, FusedKernelKind::Elementwise, 0, 1}}, device);
    slot = std::move(made);
  }
  return *slot;
}

void launch_over_elements(const GeneratedKernel& kernel, int64_t n, void** params) {
  const FusedKernelInfo info{kernel.name, FusedKernelKind::Elementwise, 0, 1};
  const int64_t count[] = {n};
  kernel.module->launch_with(kernel.name,
                             launch_geometry(info, count, kernel.module->multiprocessors()), params);
}

void launch_over_rows(const GeneratedKernel& kernel, int64_t rows, int64_t row_length,
                      void** params) {
  const FusedKernelInfo info{kernel.name, FusedKernelKind::Rows, 0, 2};
  const int64_t counts[] = {rows, row_length};
  kernel.module->launch_with(kernel.name,
                             launch_geometry(info, counts, kernel.module->multiprocessors()), params);
}

}  // namespace kiln::cuda
