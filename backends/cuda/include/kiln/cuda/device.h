// CUDA devices: whether kiln can use a GPU here, how many, and what they are. kiln loads the
// NVIDIA driver at run time (backends/cuda/README.md), so these work in every build and on
// every machine: without a driver or a GPU, is_available() is false and
// unavailable_reason() says what was looked for.
//
//   if (kiln::cuda::is_available())
//     std::cout << kiln::cuda::get_device_properties(0).name << "\n";
//   else
//     std::cout << "no CUDA device: " << kiln::cuda::unavailable_reason() << "\n";
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/device.h"

namespace kiln::cuda {

// GPU `index` as a Device: x.to(kiln::cuda::device(1)). kiln::kCUDA is device(0).
constexpr Device device(int16_t index = 0) { return Device(DeviceType::CUDA, index); }

// True when the NVIDIA driver loaded and reports at least one GPU.
bool is_available();
// The number of GPUs the driver reports (CUDA_VISIBLE_DEVICES applies); 0 when unavailable.
int device_count();
// Empty when available; otherwise why not (the driver library looked for, the driver's
// answer) and the fix.
std::string unavailable_reason();
// The driver's version as "12.4"; empty when no driver loaded.
std::string driver_version();

struct DeviceProperties {
  std::string name;  // "NVIDIA H200"
  int major = 0;     // compute capability 9.0 -> major 9, minor 0
  int minor = 0;
  int multiprocessors = 0;
  size_t total_memory = 0;  // bytes
};

// Throws kiln::Error when no GPU is available (with unavailable_reason()) or `index` is not
// below device_count().
DeviceProperties get_device_properties(int index = 0);

// Installs kiln_cuda in the runtime: the memory of tensors on GPUs (Storage, Tensor::to, host
// reads of device tensors) and its kernels in the op table. kiln::init() calls it; it needs no
// GPU.
void register_backend();

// Waits until all work queued on GPU `index` has run.
void synchronize(int index = 0);

// Copies `bytes` between host memory and memory of GPU `index` (kiln's device allocator's);
// both wait for the copy (and, to the host, for the work queued before it).
void copy_to_device(void* device_dst, const void* host_src, size_t bytes, int index = 0);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, int index = 0);

// The GPU whose memory `ptr` addresses (memory from cuMemAlloc, cudaMalloc, managed memory), or
// -1 for host memory, pinned or not, and addresses the driver does not know. Throws kiln::Error
// when no GPU is available.
int device_of_pointer(const void* ptr);

}  // namespace kiln::cuda
