// NVRTC, the CUDA run-time compiler, loaded at run time: it turns the CUDA C++ source kiln
// generates for its eager kernels into PTX, which the driver then loads. kiln never links
// libnvrtc, so the CUDA toolkit is needed neither to build kiln nor to run it: a CPU-only
// program never loads it, and a GPU program finds it when it first compiles a kernel. kiln
// looks for KILN_NVRTC (a path) when set, else libnvrtc.so.13, .so.12 and .so through the
// dynamic loader, else lib64/libnvrtc.so under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
// The types below are NVRTC's own (nvrtc.h); declaring them here keeps the toolkit out of
// the build.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cuda::nvrtc {

// True when an NVRTC library loaded and answered nvrtcVersion.
bool available();
// Empty when available; otherwise the libraries tried, why each failed, and the fix.
std::string unavailable_reason();
// NVRTC's version as "13.0"; empty when unavailable.
std::string version();

struct Options {
  std::string arch = "compute_90";  // --gpu-architecture: PTX for this virtual architecture
  std::vector<std::string> extra;   // more NVRTC options, e.g. "-lineinfo", "--use_fast_math"
};

// Compiles `source` to PTX with --gpu-architecture=<arch> -default-device --std=c++17 and
// `options.extra`. `name` names the program in NVRTC's log ("scale.cu(3): error: ..."). Throws
// kiln::Error when NVRTC is unavailable (with the reason) or the source does not compile (with
// NVRTC's log). Safe to call from several threads: each call compiles its own program.
std::string compile_to_ptx(const std::string& source, const std::string& name,
                           const Options& options = {});

// ---- The loading itself: the testable entry behind available() and compile_to_ptx. ----

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

constexpr nvrtcResult kSuccess = 0;  // NVRTC_SUCCESS; others are named by nvrtcGetErrorString

// The NVRTC entry points kiln calls, resolved by name from the loaded library.
struct Api {
  nvrtcResult (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(nvrtcResult result);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* program, const char* source, const char* name,
                                    int header_count, const char* const* headers,
                                    const char* const* include_names);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* program);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram program, int option_count,
                                     const char* const* options);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram program, size_t* bytes);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram program, char* ptx);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram program, size_t* bytes);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram program, char* log);
};

// The outcome of loading NVRTC: the API when a library loaded, else why not, in words a user
// can act on.
struct Loaded {
  std::unique_ptr<Api> api;  // null when unavailable
  std::string library;       // the name or path that was opened; empty when none opened
  int major = 0;             // nvrtcVersion: 13 and 0 for NVRTC 13.0
  int minor = 0;
  std::string unavailable_reason;
};

// Opens `explicit_path` alone when it is not empty, else searches the loader names and the
// toolkit directories above; resolves the entry points and asks the version. Never throws; the
// library stays loaded for the process. Each call loads afresh: tests use it to check reasons.
Loaded load(const std::string& explicit_path);
// load(KILN_NVRTC), or load("") when that variable is unset or empty; read afresh each call.
Loaded load_from_environment();
// The process's NVRTC: load_from_environment(), done once, on first use.
const Loaded& loaded();

}  // namespace kiln::cuda::nvrtc
