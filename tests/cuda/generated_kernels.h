// Checking generated CUDA kernels without a GPU (tests/cuda/*_kernels_test.cpp): the GPU's
// toolchain (NVRTC, then ptxas for sm_90) must accept their source, and the same source,
// compiled on the host with host versions of the GPU prelude (one thread per block, so a
// block's cooperation is its one thread's value), must compute what the CPU kernels compute.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "kiln/cuda/nvrtc.h"

namespace kiln::cuda {

// A fresh folder for this process's files.
inline std::filesystem::path scratch_dir(const std::string& what) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln_" + what + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Compiles `source` with NVRTC and assembles the PTX with `ptxas -arch=sm_90`, expecting an
// entry for each of `kernels`. Returns why it could not (no NVRTC, no ptxas), else "".
inline std::string expect_gpu_toolchain_accepts(const std::string& source,
                                                const std::vector<std::string>& kernels) {
  if (!nvrtc::available()) return "no NVRTC: " + nvrtc::unavailable_reason();
  const std::string ptx = nvrtc::compile_to_ptx(source, "kernels.cu");
  for (const std::string& name : kernels)
    EXPECT_NE(ptx.find(".entry " + name + "("), std::string::npos) << name;
  const char* home = std::getenv("CUDA_HOME");
  const std::filesystem::path ptxas =
      std::filesystem::path(home && *home ? home : "/usr/local/cuda") / "bin" / "ptxas";
  if (!std::filesystem::exists(ptxas)) return "no ptxas at " + ptxas.string() + " to assemble the PTX";
  const std::filesystem::path dir = scratch_dir("ptxas");
  std::ofstream(dir / "kernels.ptx") << ptx;
  const std::string command = ptxas.string() + " -arch=sm_90 " + (dir / "kernels.ptx").string() +
                              " -o " + (dir / "kernels.cubin").string() + " 2> " +
                              (dir / "ptxas.log").string();
  EXPECT_EQ(std::system(command.c_str()), 0) << file_text(dir / "ptxas.log");
  std::filesystem::remove_all(dir);
  return "";
}

// The host versions of what the GPU prelude defines (the kernels' own code is unchanged).
inline constexpr const char* kHostPrelude = R"(#define KILN_KERNEL_PRELUDE
#include <math.h>
#include <string.h>
#include "kiln/half.h"
#define KILN_DEVICE static inline
#define KILN_KERNEL extern "C"
#define KILN_FOR_EACH_ELEMENT(i, n) for (long long i = 0; i < (n); ++i)
#define KILN_BLOCK_INDEX 0
#define KILN_BLOCK_COUNT 1
#define KILN_THREAD_INDEX 0
#define KILN_THREAD_COUNT 1
#define KILN_COOPERATIVE_BLOCKS 0
#define __restrict__ __restrict
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __int_as_float(int b) { float f; memcpy(&f, &b, 4); return f; }
static inline float __uint_as_float(unsigned b) { float f; memcpy(&f, &b, 4); return f; }
static inline double __longlong_as_double(long long b) { double d; memcpy(&d, &b, 8); return d; }
static inline float kiln_load_f16(unsigned short h) { kiln::Half x; memcpy(&x, &h, 2); return x; }
static inline unsigned short kiln_store_f16(float f) { kiln::Half x(f); unsigned short h; memcpy(&h, &x, 2); return h; }
static inline float kiln_load_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
static inline unsigned short kiln_store_bf16(float f) { kiln::BFloat16 x(f); unsigned short h; memcpy(&h, &x, 2); return h; }
struct KilnDims { long long sizes[8]; long long strides[5][8]; };
struct KilnReduceDims { long long kept_sizes[8], kept_strides[8], reduced_sizes[8], reduced_strides[8]; };
template <class T> static inline void kiln_atomic_add(T* p, T v) { *p += v; }
static inline void kiln_atomic_add(unsigned char* p, unsigned char v) { if (v) *p = 1; }
static inline void kiln_atomic_min(long long* p, long long v) { if (v < *p) *p = v; }
)";

// The runtime's headers (kiln/half.h) for the host build: KILN_TEST_RUNTIME_INCLUDE from the
// environment (tests/gpu/device_check.sh sets it where the tree lies on the GPU machine), else
// the build tree's.
inline std::string host_include_dir() {
  const char* dir = std::getenv("KILN_TEST_RUNTIME_INCLUDE");
  return dir && *dir ? dir : KILN_TEST_RUNTIME_INCLUDE;
}

// Why the host build cannot run here (no compiler, no runtime headers), or "".
inline std::string host_build_unavailable() {
  if (!std::filesystem::exists(KILN_TEST_CXX))
    return std::string("no C++ compiler at ") + KILN_TEST_CXX + " to build the kernels on the host";
  if (!std::filesystem::exists(host_include_dir() + "/kiln/half.h"))
    return "no kiln/half.h under " + host_include_dir() + " (set KILN_TEST_RUNTIME_INCLUDE)";
  return "";
}

// Builds `source` on the host (after kHostPrelude) into a shared library in `dir` and opens
// it; null, with the compiler's messages as a failure, when it does not build.
inline std::shared_ptr<void> build_on_host(const std::string& source, const std::filesystem::path& dir) {
  std::ofstream(dir / "kernels.cpp") << kHostPrelude << source;
  const std::string command = std::string(KILN_TEST_CXX) + " -std=c++20 -O1 -shared -fPIC -w -I" +
                              host_include_dir() + " " + (dir / "kernels.cpp").string() +
                              " -o " + (dir / "kernels.so").string() + " 2> " +
                              (dir / "build.log").string();
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "the host build of the kernels failed:\n"
                  << file_text(dir / "build.log").substr(0, 4000);
    return nullptr;
  }
  void* handle = dlopen((dir / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  return std::shared_ptr<void>(handle, [](void* h) {
    if (h) dlclose(h);
  });
}

}  // namespace kiln::cuda
