// Loading NVRTC with dlopen and compiling CUDA C++ to PTX with it: every way loading can fail
// becomes a reason naming what was tried, every failed compile a message with NVRTC's log.
#include "kiln/cuda/nvrtc.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "kiln/error.h"
#include "toolkit_library.h"

namespace kiln::cuda::nvrtc {

namespace {

// The nvrtcResult values kiln gives their own fix.
constexpr nvrtcResult kErrorInvalidOption = 5;
constexpr nvrtcResult kErrorBuiltinOperationFailure = 7;  // libnvrtc-builtins did not load

constexpr const char* kFix =
    "Fix: install the CUDA toolkit's libnvrtc (CUDA 12 or 13; NVIDIA also ships it alone, e.g. "
    "as the apt package cuda-nvrtc-13-0 or the pip package nvidia-cuda-nvrtc), and set "
    "KILN_NVRTC to the path of its libnvrtc.so.* when it is not on the dynamic loader's path.";

// Resolves one entry point into `slot`; false (and the reason) when the library lacks it.
template <class Fn>
bool resolve(void* handle, const char* name, Fn& slot, const std::string& library,
             std::string& reason) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot) return true;
  reason = library + " has no " + name + ": it is not NVRTC. " + kFix;
  return false;
}

bool resolve_all(void* handle, Api& api, const std::string& library, std::string& reason) {
#define KILN_RESOLVE(name) resolve(handle, #name, api.name, library, reason)
  return KILN_RESOLVE(nvrtcVersion) && KILN_RESOLVE(nvrtcGetErrorString) &&
         KILN_RESOLVE(nvrtcCreateProgram) && KILN_RESOLVE(nvrtcDestroyProgram) &&
         KILN_RESOLVE(nvrtcCompileProgram) && KILN_RESOLVE(nvrtcGetPTXSize) &&
         KILN_RESOLVE(nvrtcGetPTX) && KILN_RESOLVE(nvrtcGetProgramLogSize) &&
         KILN_RESOLVE(nvrtcGetProgramLog);
#undef KILN_RESOLVE
}

// NVRTC opens libnvrtc-builtins.so.<major>.<minor> by name when it compiles, through the
// dynamic loader's path only, not from its own directory. So a libnvrtc found by path (KILN_NVRTC,
// the toolkit directory, a pip wheel) loads but fails every compile with
// NVRTC_ERROR_BUILTIN_OPERATION_FAILURE. Opening the builtins beside it first makes the loader
// hand NVRTC that copy, matched by its soname. Best effort: without it, the compile reports it.
void preload_builtins(void* handle, int major, int minor) {
  char origin[PATH_MAX] = {};
  if (dlinfo(handle, RTLD_DI_ORIGIN, origin) != 0) return;
  std::string builtins = std::string(origin) + "/libnvrtc-builtins.so." + std::to_string(major) +
                         "." + std::to_string(minor);
  std::error_code ec;
  if (std::filesystem::exists(builtins, ec)) dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL);
}

std::string error_string(const Api& api, nvrtcResult result) {
  const char* text = api.nvrtcGetErrorString(result);
  return text ? text : "nvrtcResult " + std::to_string(result);
}

// Destroys the program when a compile returns or throws.
struct ProgramGuard {
  const Api& api;
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) api.nvrtcDestroyProgram(&program);
  }
};

// The program's log: the compiler's errors and warnings, each with "name(line)".
std::string program_log(const Api& api, nvrtcProgram program) {
  size_t bytes = 0;
  if (api.nvrtcGetProgramLogSize(program, &bytes) != kSuccess || bytes <= 1) return "";
  std::string log(bytes, '\0');
  if (api.nvrtcGetProgramLog(program, log.data()) != kSuccess) return "";
  log.resize(bytes - 1);  // the size counts the terminating NUL
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

// What to do about a failed compile, by NVRTC's result.
std::string compile_fix(nvrtcResult result, const Options& options) {
  switch (result) {
    case kErrorInvalidOption:
      return "Fix: check the options; this NVRTC may not know --gpu-architecture=" + options.arch +
             " (older toolkits lack newer GPUs), or one of Options::extra.";
    case kErrorBuiltinOperationFailure:
      return "Fix: NVRTC could not load its libnvrtc-builtins.so of the same version; put it "
             "in the directory of libnvrtc, or its directory on LD_LIBRARY_PATH.";
    default:
      return "Fix: correct the source at the lines the log names; for a kernel kiln generated "
             "this is a bug in kiln, please report it with this message.";
  }
}

}  // namespace

Loaded load(const std::string& explicit_path) {
  Loaded out;
  std::vector<std::string> tried;
  // Newest first: NVRTC's ABI is stable within a major version, and 12 and 13 both compile
  // what kiln generates.
  void* handle = open_toolkit_library(explicit_path, {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
                                      "libnvrtc.so", out.library, tried);
  if (!handle) {
    std::string what = explicit_path.empty() ? "NVRTC (the CUDA run-time compiler) was not found"
                                             : "NVRTC could not be loaded from " + explicit_path +
                                                   " (set by KILN_NVRTC)";
    out.unavailable_reason = what + "; tried: " + joined(tried, "; ") + ". " + kFix;
    return out;
  }
  auto api = std::make_unique<Api>();
  if (!resolve_all(handle, *api, out.library, out.unavailable_reason)) return out;
  nvrtcResult result = api->nvrtcVersion(&out.major, &out.minor);
  if (result != kSuccess) {
    out.unavailable_reason =
        out.library + ": nvrtcVersion failed with " + error_string(*api, result) + ". " + kFix;
    return out;
  }
  preload_builtins(handle, out.major, out.minor);
  out.api = std::move(api);
  return out;
}

Loaded load_from_environment() {
  const char* path = std::getenv("KILN_NVRTC");
  return load(path ? path : "");
}

const Loaded& loaded() {
  // A function-local static: loaded once, thread-safely; leaked, since kernels compile until
  // exit.
  static const Loaded* nvrtc = new Loaded(load_from_environment());
  return *nvrtc;
}

bool available() {
  return loaded().api != nullptr;
}

std::string unavailable_reason() {
  return loaded().unavailable_reason;
}

std::string version() {
  const Loaded& l = loaded();
  return l.api ? std::to_string(l.major) + "." + std::to_string(l.minor) : "";
}

std::string compile_to_ptx(const std::string& source, const std::string& name,
                           const Options& options) {
  const Loaded& l = loaded();
  KILN_CHECK(l.api, "[nvrtc] cannot compile ", name, ": ", l.unavailable_reason);
  const Api& api = *l.api;

  ProgramGuard guard{api};
  nvrtcResult result =
      api.nvrtcCreateProgram(&guard.program, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  KILN_CHECK(result == kSuccess, "[nvrtc] creating the program ", name, " failed with ",
             error_string(api, result), ". Fix: the source must be non-empty text.");

  // -default-device: functions without __host__/__device__ are device code, as in generated
  // kernels that call small helpers.
  std::vector<std::string> flags = {"--gpu-architecture=" + options.arch, "-default-device",
                                    "--std=c++17"};
  flags.insert(flags.end(), options.extra.begin(), options.extra.end());
  std::vector<const char*> argv;
  for (const std::string& flag : flags) argv.push_back(flag.c_str());

  result = api.nvrtcCompileProgram(guard.program, static_cast<int>(argv.size()), argv.data());
  if (result != kSuccess) {
    KILN_FAIL("[nvrtc] compiling ", name, " failed with ", error_string(api, result),
              " (options: ", joined(flags, " "), "; NVRTC ", l.major, ".", l.minor, ", ", l.library,
              "):\n", program_log(api, guard.program), "\n", compile_fix(result, options));
  }

  size_t bytes = 0;
  result = api.nvrtcGetPTXSize(guard.program, &bytes);
  std::string ptx(bytes, '\0');
  if (result == kSuccess && bytes > 0) result = api.nvrtcGetPTX(guard.program, ptx.data());
  KILN_CHECK(result == kSuccess && bytes > 0, "[nvrtc] reading the PTX of ", name, " failed with ",
             error_string(api, result), ". Fix: this is a bug in NVRTC ", l.major, ".", l.minor,
             "; try another version with KILN_NVRTC.");
  ptx.resize(bytes - 1);  // the size counts the terminating NUL
  return ptx;
}

}  // namespace kiln::cuda::nvrtc
