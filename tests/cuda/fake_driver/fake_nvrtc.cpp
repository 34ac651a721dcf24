// A fake NVRTC: a stand-in for libnvrtc that the fake-driver tests load through KILN_NVRTC,
// so that every kernel kiln generates also runs on machines without a GPU. "Compiling" builds
// the CUDA source on the host (after cuda/host_prelude.h's host versions of the GPU prelude)
// into a shared library, with a launcher per kernel, `<kernel>__kiln_launch(void** params,
// void* (*to_host)(void*))`, that unpacks the kernel's parameters as cuLaunchKernel receives
// them and turns device pointers into host ones. The "PTX" it returns names that library; the
// fake driver (fake_driver.cpp) loads it and calls the launchers. Libraries are kept in a
// folder by the source's hash (KILN_FAKE_NVRTC_CACHE, else the temp folder), so a kernel is
// built once per source across test runs.
//
// The host runs a kernel as one thread per block: its grid-stride loops cover everything and
// its block reductions return the one thread's value, exactly as the host checks of the
// generated kernels run them (tests/cuda/*_kernels_test.cpp).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/host_prelude.h"

namespace {

using nvrtcResult = int;
constexpr nvrtcResult kSuccess = 0;
constexpr nvrtcResult kInvalidInput = 3;
constexpr nvrtcResult kInvalidProgram = 4;
constexpr nvrtcResult kCompilation = 6;

// Marks the fake PTX; the fake driver reads the library's path after it.
constexpr const char* kFakePtxHeader = "// kiln fake ptx: ";

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  const size_t e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string without(std::string s, const std::string& word) {
  for (size_t at = s.find(word); at != std::string::npos; at = s.find(word)) s.erase(at, word.size());
  return trimmed(s);
}

// The launcher of each `KILN_KERNEL void name(parameters) {` in `source`: a pointer parameter
// gets the host address of the device pointer in its slot, any other its slot's value. Beside
// it, `<kernel>__kiln_param_sizes`: the parameter count, then each one's size, which the fake
// driver needs to copy the parameters of a launch it records into a CUDA graph.
std::string launchers(const std::string& source) {
  std::string out;
  const std::string marker = "KILN_KERNEL void ";
  for (size_t at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1)) {
    const size_t name_begin = at + marker.size();
    const size_t open = source.find('(', name_begin);
    const size_t close = source.find(')', open);
    if (open == std::string::npos || close == std::string::npos) break;
    const std::string name = trimmed(source.substr(name_begin, open - name_begin));
    std::vector<std::string> parameters;
    std::stringstream list(source.substr(open + 1, close - open - 1));
    for (std::string p; std::getline(list, p, ',');) parameters.push_back(trimmed(p));
    std::string args, sizes = std::to_string(parameters.size());
    for (size_t k = 0; k < parameters.size(); ++k) {
      const std::string& p = parameters[k];
      const size_t name_at = p.find_last_of(" *&");
      const std::string type = without(p.substr(0, name_at + 1), "__restrict__");
      const std::string slot = "params[" + std::to_string(k) + "]";
      args += k ? ", " : "";
      sizes += ", sizeof(" + type + ")";
      if (type.find('*') != std::string::npos)
        args += "(" + type + ")to_host(*(void* const*)" + slot + ")";
      else
        args += "*(" + type + "*)" + slot;
    }
    out += "extern \"C\" void " + name + "__kiln_launch(void** params, void* (*to_host)(void*)) {\n  " + name +
           "(" + args + ");\n}\n";
    out += "extern \"C\" const unsigned long long " + name + "__kiln_param_sizes[] = {" + sizes + "};\n";
  }
  return out;
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::filesystem::path cache_dir() {
  const char* env = std::getenv("KILN_FAKE_NVRTC_CACHE");
  std::filesystem::path dir = env && *env ? std::filesystem::path(env)
                                          : std::filesystem::temp_directory_path() /
                                                ("kiln_fake_nvrtc_" + std::to_string(::getuid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string include_dir() {
  const char* dir = std::getenv("KILN_TEST_RUNTIME_INCLUDE");
  return dir && *dir ? dir : KILN_TEST_RUNTIME_INCLUDE;
}

}  // namespace

struct _nvrtcProgram {
  std::string source, name, ptx, log;
};

#define KILN_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// Version 0.0 tells tests (cuda/requirements.h) that kernels run on the host.
KILN_FAKE_EXPORT nvrtcResult nvrtcVersion(int* major, int* minor) {
  *major = 0;
  *minor = 0;
  return kSuccess;
}

KILN_FAKE_EXPORT const char* nvrtcGetErrorString(nvrtcResult result) {
  switch (result) {
    case kSuccess:
      return "NVRTC_SUCCESS";
    case kCompilation:
      return "NVRTC_ERROR_COMPILATION (the host build of the kiln fake NVRTC failed)";
    default:
      return "NVRTC_ERROR (kiln fake NVRTC)";
  }
}

KILN_FAKE_EXPORT nvrtcResult nvrtcCreateProgram(_nvrtcProgram** program, const char* source, const char* name,
                                                int, const char* const*, const char* const*) {
  if (!program || !source) return kInvalidInput;
  *program = new _nvrtcProgram{source, name ? name : "kernels.cu", "", ""};
  return kSuccess;
}

KILN_FAKE_EXPORT nvrtcResult nvrtcDestroyProgram(_nvrtcProgram** program) {
  if (!program) return kInvalidProgram;
  delete *program;
  *program = nullptr;
  return kSuccess;
}

KILN_FAKE_EXPORT nvrtcResult nvrtcCompileProgram(_nvrtcProgram* program, int, const char* const*) {
  if (!program) return kInvalidProgram;
  const std::string text = std::string(kiln::cuda::kHostPrelude) + program->source + launchers(program->source);
  const std::filesystem::path dir = cache_dir();
  const std::string stem = "kernels_" + std::to_string(std::hash<std::string>()(text));
  const std::filesystem::path library = dir / (stem + ".so");
  if (!std::filesystem::exists(library)) {
    // Built under a name of this process's, then renamed: parallel test processes share the folder.
    const std::string mine = stem + "_" + std::to_string(::getpid());
    std::ofstream(dir / (mine + ".cpp")) << text;
    const std::string command = std::string(KILN_TEST_CXX) + " -std=c++20 -O1 -shared -fPIC -w -I" + include_dir() +
                                " " + (dir / (mine + ".cpp")).string() + " -o " + (dir / (mine + ".so")).string() +
                                " 2> " + (dir / (mine + ".log")).string();
    if (std::system(command.c_str()) != 0) {
      program->log = file_text(dir / (mine + ".log"));
      return kCompilation;
    }
    std::filesystem::rename(dir / (mine + ".so"), library);
    std::filesystem::remove(dir / (mine + ".cpp"));
    std::filesystem::remove(dir / (mine + ".log"));
  }
  program->ptx = kFakePtxHeader + library.string() + "\n";
  return kSuccess;
}

KILN_FAKE_EXPORT nvrtcResult nvrtcGetPTXSize(_nvrtcProgram* program, size_t* bytes) {
  if (!program || !bytes) return kInvalidInput;
  *bytes = program->ptx.size() + 1;
  return kSuccess;
}

KILN_FAKE_EXPORT nvrtcResult nvrtcGetPTX(_nvrtcProgram* program, char* ptx) {
  if (!program || !ptx) return kInvalidInput;
  std::memcpy(ptx, program->ptx.c_str(), program->ptx.size() + 1);
  return kSuccess;
}

KILN_FAKE_EXPORT nvrtcResult nvrtcGetProgramLogSize(_nvrtcProgram* program, size_t* bytes) {
  if (!program || !bytes) return kInvalidInput;
  *bytes = program->log.size() + 1;
  return kSuccess;
}

KILN_FAKE_EXPORT nvrtcResult nvrtcGetProgramLog(_nvrtcProgram* program, char* log) {
  if (!program || !log) return kInvalidInput;
  std::memcpy(log, program->log.c_str(), program->log.size() + 1);
  return kSuccess;
}
