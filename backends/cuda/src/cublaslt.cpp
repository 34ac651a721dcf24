// Loading cuBLASLt with dlopen (kiln/cuda/cublaslt.h): every way it can fail becomes a reason
// naming what was tried.
#include "kiln/cuda/cublaslt.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "toolkit_library.h"

namespace kiln::cuda::cublaslt {

namespace {

constexpr const char* kFix =
    "Fix: install the CUDA toolkit's cuBLAS (CUDA 12 or 13; NVIDIA also ships it alone, e.g. as "
    "the apt package libcublas-13-0 or the pip package nvidia-cublas), and set KILN_CUBLASLT to "
    "the path of its libcublasLt.so.* when it is not on the dynamic loader's path.";

template <class Fn>
bool resolve(void* handle, const char* name, Fn& slot, const std::string& library,
             std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot) return true;
  reason = library + " has no " + name + ": it is not cuBLASLt 12 or newer. " + kFix;
  return false;
}

bool resolve_all(void* handle, Api& api, const std::string& library, std::string& reason) {
#define KILN_RESOLVE(name) resolve(handle, #name, api.name, library, reason)
  return KILN_RESOLVE(cublasLtCreate) && KILN_RESOLVE(cublasLtDestroy) &&
         KILN_RESOLVE(cublasLtGetVersion) && KILN_RESOLVE(cublasLtGetStatusName) &&
         KILN_RESOLVE(cublasLtMatmulDescCreate) && KILN_RESOLVE(cublasLtMatmulDescDestroy) &&
         KILN_RESOLVE(cublasLtMatmulDescSetAttribute) && KILN_RESOLVE(cublasLtMatrixLayoutCreate) &&
         KILN_RESOLVE(cublasLtMatrixLayoutDestroy) &&
         KILN_RESOLVE(cublasLtMatrixLayoutSetAttribute) &&
         KILN_RESOLVE(cublasLtMatmulPreferenceCreate) &&
         KILN_RESOLVE(cublasLtMatmulPreferenceDestroy) &&
         KILN_RESOLVE(cublasLtMatmulPreferenceSetAttribute) &&
         KILN_RESOLVE(cublasLtMatmulAlgoGetHeuristic) && KILN_RESOLVE(cublasLtMatmul);
#undef KILN_RESOLVE
}

}  // namespace

Loaded load(const std::string& explicit_path) {
  Loaded out;
  std::vector<std::string> tried;
  void* handle = open_toolkit_library(
      explicit_path, {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
      "libcublasLt.so", out.library, tried);
  if (!handle) {
    const std::string what = explicit_path.empty()
                                 ? "cuBLASLt (the CUDA toolkit's GEMM library) was not found"
                                 : "cuBLASLt could not be loaded from " + explicit_path +
                                       " (set by KILN_CUBLASLT)";
    out.unavailable_reason = what + "; tried: " + joined(tried, "; ") + ". " + kFix;
    return out;
  }
  auto api = std::make_unique<Api>();
  if (!resolve_all(handle, *api, out.library, out.unavailable_reason)) return out;
  out.version = api->cublasLtGetVersion();
  out.api = std::move(api);
  return out;
}

const Loaded& loaded() {
  // Loaded once, thread-safely; leaked, since GEMMs run until exit.
  static const Loaded* library = [] {
    const char* path = std::getenv("KILN_CUBLASLT");
    return new Loaded(load(path ? path : ""));
  }();
  return *library;
}

bool available() {
  return loaded().api != nullptr;
}

std::string unavailable_reason() {
  return loaded().unavailable_reason;
}

std::string status_name(Status status) {
  const Loaded& l = loaded();
  const char* name = l.api ? l.api->cublasLtGetStatusName(status) : nullptr;
  return name ? name : "cublasStatus_t " + std::to_string(status);
}

}  // namespace kiln::cuda::cublaslt
