// For the fake libraries that queue work on the fake driver's streams (fake_cublaslt.cpp,
// fake_cudnn.cpp): the fake driver runs everything at once, except on a stream that captures
// a CUDA graph, where work is recorded (as a host function) to run when the graph does.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <utility>

#include "kiln/cuda/driver.h"

namespace kiln::cuda::fake {

// Runs `work` now, or, when `stream` (a CUstream) captures a CUDA graph on the fake driver
// (KILN_CUDA_DRIVER), records it there. The recorded work is kept for the process (a graph
// may replay it at any time).
inline void on_stream(void* stream, std::function<void()> work) {
  using IsCapturing = decltype(driver::Api::cuStreamIsCapturing);
  using LaunchHostFunc = decltype(driver::Api::cuLaunchHostFunc);
  static const auto [is_capturing, launch_host_func] = [] {
    const char* path = std::getenv("KILN_CUDA_DRIVER");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return std::pair{lib ? reinterpret_cast<IsCapturing>(dlsym(lib, "cuStreamIsCapturing")) : nullptr,
                     lib ? reinterpret_cast<LaunchHostFunc>(dlsym(lib, "cuLaunchHostFunc")) : nullptr};
  }();
  const auto native = static_cast<driver::CUstream>(stream);
  int status = driver::kStreamCaptureStatusNone;
  if (!is_capturing || !launch_host_func || is_capturing(native, &status) != driver::kSuccess ||
      status == driver::kStreamCaptureStatusNone) {
    work();
    return;
  }
  auto* kept = new std::function<void()>(std::move(work));
  launch_host_func(native, [](void* w) { (*static_cast<std::function<void()>*>(w))(); }, kept);
}

}  // namespace kiln::cuda::fake
