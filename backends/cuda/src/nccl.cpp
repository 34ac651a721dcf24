// Loading NCCL with dlopen (kiln/cuda/nccl.h): every way it can fail becomes a reason naming
// what was tried.
#include "kiln/cuda/nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "device_context.h"
#include "toolkit_library.h"

namespace kiln::cuda::nccl {

namespace {

constexpr const char* kFix =
    "Fix: install NCCL 2.10 or newer (the CUDA toolkit's libnccl, the apt package libnccl2, or "
    "the pip package nvidia-nccl-cu12/cu13 that PyTorch installs), and set KILN_NCCL to the path "
    "of its libnccl.so.2 when it is not on the dynamic loader's path.";

template <class Fn>
bool resolve(void* handle, const char* name, Fn& slot, const std::string& library, std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot) return true;
  reason = library + " has no " + name + ": it is not NCCL 2.10 or newer. " + kFix;
  return false;
}

bool resolve_all(void* handle, Api& api, const std::string& library, std::string& reason) {
#define KILN_RESOLVE(name) resolve(handle, #name, api.name, library, reason)
  return KILN_RESOLVE(ncclGetVersion) && KILN_RESOLVE(ncclGetUniqueId) && KILN_RESOLVE(ncclCommInitRank) &&
         KILN_RESOLVE(ncclCommDestroy) && KILN_RESOLVE(ncclCommAbort) && KILN_RESOLVE(ncclCommGetAsyncError) &&
         KILN_RESOLVE(ncclGetErrorString) && KILN_RESOLVE(ncclGetLastError) && KILN_RESOLVE(ncclAllReduce) &&
         KILN_RESOLVE(ncclBroadcast) && KILN_RESOLVE(ncclReduce) && KILN_RESOLVE(ncclAllGather) &&
         KILN_RESOLVE(ncclReduceScatter) && KILN_RESOLVE(ncclGroupStart) && KILN_RESOLVE(ncclGroupEnd);
#undef KILN_RESOLVE
}

}  // namespace

Loaded load(const std::string& explicit_path) {
  Loaded out;
  std::vector<std::string> tried;
  void* handle = open_toolkit_library(explicit_path, {"libnccl.so.2", "libnccl.so"}, "libnccl.so.2", out.library,
                                      tried);
  if (!handle) {
    const std::string what = explicit_path.empty()
                                 ? "NCCL (NVIDIA's collective library) was not found"
                                 : "NCCL could not be loaded from " + explicit_path + " (set by KILN_NCCL)";
    out.unavailable_reason = what + "; tried: " + joined(tried, "; ") + ". " + kFix;
    return out;
  }
  auto api = std::make_unique<Api>();
  if (!resolve_all(handle, *api, out.library, out.unavailable_reason)) return out;
  if (api->ncclGetVersion(&out.version) != kSuccess || out.version < 21000) {
    out.unavailable_reason = out.library + " is NCCL version code " + std::to_string(out.version) +
                             ", older than 2.10 (kiln averages with ncclAvg). " + kFix;
    return out;
  }
  out.api = std::move(api);
  return out;
}

const Loaded& loaded() {
  // Loaded once, thread-safely; leaked, since communicators live until exit.
  static const Loaded* library = [] {
    const char* path = std::getenv("KILN_NCCL");
    return new Loaded(load(path ? path : ""));
  }();
  return *library;
}

bool available() { return loaded().api != nullptr; }

std::string unavailable_reason() { return loaded().unavailable_reason; }

std::string version_string() {
  const int v = loaded().version;
  if (!available()) return "";
  // Since 2.9 the code is major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string result_name(Result result) {
  const Loaded& l = loaded();
  const char* name = l.api ? l.api->ncclGetErrorString(result) : nullptr;
  return name ? name : "ncclResult_t " + std::to_string(result);
}

void bind_device(int device) { use_device(device); }

}  // namespace kiln::cuda::nccl
