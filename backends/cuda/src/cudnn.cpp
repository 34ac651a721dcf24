// Loading cuDNN with dlopen (kiln/cuda/cudnn.h): every way it can fail becomes a reason naming
// what was tried.
#include "kiln/cuda/cudnn.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "toolkit_library.h"

namespace kiln::cuda::cudnn {

namespace {

constexpr const char* kFix =
    "Fix: install cuDNN 9 (the apt package libcudnn9-cuda-13 or the pip package "
    "nvidia-cudnn-cu13), and set KILN_CUDNN to the path of its libcudnn.so.9 when it is not on "
    "the dynamic loader's path. Without it convolutions run as im2col + cuBLASLt.";

template <class Fn>
bool resolve(void* handle, const char* name, Fn& slot, const std::string& library,
             std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot) return true;
  reason = library + " has no " + name + ": it is not cuDNN 8 or 9. " + kFix;
  return false;
}

bool resolve_all(void* handle, Api& api, const std::string& library, std::string& reason) {
#define KILN_RESOLVE(name) resolve(handle, #name, api.name, library, reason)
  return KILN_RESOLVE(cudnnGetVersion) && KILN_RESOLVE(cudnnGetErrorString) &&
         KILN_RESOLVE(cudnnCreate) && KILN_RESOLVE(cudnnDestroy) && KILN_RESOLVE(cudnnSetStream) &&
         KILN_RESOLVE(cudnnCreateTensorDescriptor) && KILN_RESOLVE(cudnnDestroyTensorDescriptor) &&
         KILN_RESOLVE(cudnnSetTensorNdDescriptor) && KILN_RESOLVE(cudnnCreateFilterDescriptor) &&
         KILN_RESOLVE(cudnnDestroyFilterDescriptor) && KILN_RESOLVE(cudnnSetFilterNdDescriptor) &&
         KILN_RESOLVE(cudnnCreateConvolutionDescriptor) &&
         KILN_RESOLVE(cudnnDestroyConvolutionDescriptor) &&
         KILN_RESOLVE(cudnnSetConvolution2dDescriptor) &&
         KILN_RESOLVE(cudnnSetConvolutionGroupCount) &&
         KILN_RESOLVE(cudnnSetConvolutionMathType) &&
         KILN_RESOLVE(cudnnGetConvolutionForwardAlgorithm_v7) &&
         KILN_RESOLVE(cudnnGetConvolutionForwardWorkspaceSize) &&
         KILN_RESOLVE(cudnnConvolutionForward) &&
         KILN_RESOLVE(cudnnGetConvolutionBackwardDataAlgorithm_v7) &&
         KILN_RESOLVE(cudnnGetConvolutionBackwardDataWorkspaceSize) &&
         KILN_RESOLVE(cudnnConvolutionBackwardData) &&
         KILN_RESOLVE(cudnnGetConvolutionBackwardFilterAlgorithm_v7) &&
         KILN_RESOLVE(cudnnGetConvolutionBackwardFilterWorkspaceSize) &&
         KILN_RESOLVE(cudnnConvolutionBackwardFilter);
#undef KILN_RESOLVE
}

}  // namespace

Loaded load(const std::string& explicit_path) {
  Loaded out;
  if (explicit_path == "0") {
    out.unavailable_reason = "cuDNN is off (KILN_CUDNN=0)";
    return out;
  }
  std::vector<std::string> tried;
  void* handle = open_toolkit_library(explicit_path, {"libcudnn.so.9", "libcudnn.so"},
                                      "libcudnn.so", out.library, tried);
  if (!handle) {
    const std::string what = explicit_path.empty()
                                 ? "cuDNN (NVIDIA's convolution library) was not found"
                                 : "cuDNN could not be loaded from " + explicit_path +
                                       " (set by KILN_CUDNN)";
    out.unavailable_reason = what + "; tried: " + joined(tried, "; ") + ". " + kFix;
    return out;
  }
  auto api = std::make_unique<Api>();
  if (!resolve_all(handle, *api, out.library, out.unavailable_reason)) return out;
  out.version = api->cudnnGetVersion();
  out.api = std::move(api);
  return out;
}

const Loaded& loaded() {
  // Loaded once, thread-safely; leaked, since convolutions run until exit.
  static const Loaded* library = [] {
    const char* path = std::getenv("KILN_CUDNN");
    return new Loaded(load(path ? path : ""));
  }();
  return *library;
}

std::string status_name(Status status) {
  const Loaded& l = loaded();
  const char* name = l.api ? l.api->cudnnGetErrorString(status) : nullptr;
  return name ? name : "cudnnStatus_t " + std::to_string(status);
}

}  // namespace kiln::cuda::cudnn
