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

#include "cuda/host_prelude.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/kiln.h"

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

// NVRTC and ptxas accept the kernel `source_of(kind, dtype, name)` of every kind and dtype
// (named "<prefix><kind>_<dtype>"); skips with the reason when the toolchain is missing.
template <class Kind, class SourceOf>
void expect_every_kernel_compiles(const std::string& prefix, std::initializer_list<Kind> kinds,
                                  std::initializer_list<DType> dtypes, SourceOf&& source_of) {
  std::string source;
  std::vector<std::string> names;
  for (DType dtype : dtypes) {
    for (Kind kind : kinds) {
      names.push_back(prefix + std::to_string(static_cast<int>(kind)) + "_" + std::string(dtype_name(dtype)));
      source += source_of(kind, dtype, names.back());
    }
  }
  const std::string skipped = expect_gpu_toolchain_accepts(source, names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

// A suite whose kernels are built on the host once (build() in SetUpTestSuite, release() in
// TearDownTestSuite); its tests skip where the host build cannot run and find the kernels'
// entries with entry<Fn>(name).
class HostKernelSuite : public ::testing::Test {
 protected:
  static void build(const std::string& what, const std::string& source) {
    if (!host_build_unavailable().empty()) return;
    init();
    dir_ = scratch_dir(what);
    library_ = build_on_host(source, dir_);
  }
  static void release() {
    library_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void SetUp() override {
    if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(library_) << "the suite's kernels did not build on the host";
  }
  template <class Fn>
  static Fn entry(const std::string& name) {
    void* f = dlsym(library_.get(), name.c_str());
    EXPECT_NE(f, nullptr) << name;
    return reinterpret_cast<Fn>(f);
  }

 private:
  static inline std::filesystem::path dir_;
  static inline std::shared_ptr<void> library_;
};

}  // namespace kiln::cuda
