// NVRTC loaded at run time: what each way of not finding it reports, and, where the CUDA toolkit
// is installed, CUDA C++ compiled to PTX that ptxas accepts and compile errors with NVRTC's
// log. No GPU is needed; tests that need NVRTC skip with "no NVRTC" on machines without it.
#include "kiln/cuda/nvrtc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kiln::cuda {
namespace {

#define REQUIRE_NVRTC()                                                                   \
  do {                                                                                    \
    if (!nvrtc::available()) GTEST_SKIP() << "no NVRTC: " << nvrtc::unavailable_reason(); \
  } while (0)

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A grid-stride loop: the shape of kiln's generated elementwise kernels.
constexpr const char* kScale = R"(
extern "C" __global__ void scale(float* x, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    x[i] *= a;
}
)";

TEST(CudaNvrtc, AvailabilityTheReasonAndTheVersionAgree) {
  EXPECT_EQ(nvrtc::available(), nvrtc::unavailable_reason().empty()) << nvrtc::unavailable_reason();
  EXPECT_EQ(nvrtc::available(), !nvrtc::version().empty());
}

TEST(CudaNvrtc, AMissingExplicitPathIsNamedWithTheFix) {
  const std::string path = "/nonexistent/libnvrtc.so.13";
  EnvVar env("KILN_NVRTC", path.c_str());
  nvrtc::Loaded l = nvrtc::load_from_environment();
  EXPECT_EQ(l.api, nullptr);
  EXPECT_TRUE(contains(l.unavailable_reason, path)) << l.unavailable_reason;
  EXPECT_TRUE(contains(l.unavailable_reason, "KILN_NVRTC")) << l.unavailable_reason;
  EXPECT_TRUE(contains(l.unavailable_reason, "Fix:")) << l.unavailable_reason;
  // The explicit path is exclusive: nothing else was tried.
  EXPECT_FALSE(contains(l.unavailable_reason, "libnvrtc.so.12")) << l.unavailable_reason;
}

TEST(CudaNvrtc, ALibraryWithoutTheNvrtcApiIsRefusedByTheFirstMissingEntryPoint) {
  nvrtc::Loaded l = nvrtc::load("libm.so.6");
  EXPECT_EQ(l.api, nullptr);
  EXPECT_TRUE(contains(l.unavailable_reason, "libm.so.6 has no nvrtcVersion"))
      << l.unavailable_reason;
}

TEST(CudaNvrtc, TheSearchFindsTheToolkitsLibrary) {
  REQUIRE_NVRTC();
  nvrtc::Loaded l = nvrtc::load("");
  ASSERT_NE(l.api, nullptr) << l.unavailable_reason;
  EXPECT_GE(l.major, 12) << l.library;
  EXPECT_EQ(nvrtc::version(), std::to_string(l.major) + "." + std::to_string(l.minor));
}

TEST(CudaNvrtc, CompilesAKernelToPtxForTheArchitecture) {
  REQUIRE_NVRTC();
  std::string ptx = nvrtc::compile_to_ptx(kScale, "scale.cu");
  EXPECT_TRUE(contains(ptx, ".visible .entry scale")) << ptx;
  EXPECT_TRUE(contains(ptx, ".target sm_90")) << ptx;

  nvrtc::Options sm80;
  sm80.arch = "compute_80";
  EXPECT_TRUE(contains(nvrtc::compile_to_ptx(kScale, "scale.cu", sm80), ".target sm_80"));
}

TEST(CudaNvrtc, ThePtxAssemblesWithPtxas) {
  REQUIRE_NVRTC();
  std::string ptxas = "/usr/local/cuda/bin/ptxas";
  if (const char* home = std::getenv("CUDA_HOME"); home && *home)
    if (std::filesystem::exists(std::string(home) + "/bin/ptxas"))
      ptxas = std::string(home) + "/bin/ptxas";
  if (!std::filesystem::exists(ptxas)) GTEST_SKIP() << "no ptxas at $CUDA_HOME/bin or " << ptxas;

  std::string ptx = nvrtc::compile_to_ptx(kScale, "scale.cu");
  auto file = std::filesystem::temp_directory_path() /
              ("kiln_nvrtc_test_" + std::to_string(::getpid()) + ".ptx");
  std::ofstream(file) << ptx;
  int status = std::system((ptxas + " -arch=sm_90 " + file.string() + " -o /dev/null").c_str());
  std::filesystem::remove(file);
  EXPECT_EQ(status, 0) << ptx;
}

TEST(CudaNvrtc, ACompileErrorCarriesNvrtcsLogWithTheLine) {
  REQUIRE_NVRTC();
  const char* broken = "extern \"C\" __global__ void f(float* x) {\n  x[0] = ;\n}\n";
  expect_error(
      [&] { nvrtc::compile_to_ptx(broken, "broken.cu"); },
      {"[nvrtc] compiling broken.cu failed", "NVRTC_ERROR_COMPILATION", "broken.cu(2)", "Fix:"});
}

TEST(CudaNvrtc, AnUnknownArchitectureIsAnInvalidOption) {
  REQUIRE_NVRTC();
  nvrtc::Options options;
  options.arch = "compute_1";
  expect_error([&] { nvrtc::compile_to_ptx(kScale, "scale.cu", options); },
               {"[nvrtc] compiling scale.cu failed", "NVRTC_ERROR_INVALID_OPTION",
                "--gpu-architecture=compute_1", "Fix:"});
}

TEST(CudaNvrtc, MathFunctionsNeedNoHeaders) {
  REQUIRE_NVRTC();
  const char* source = R"(
extern "C" __global__ void math(float* f, double* d) {
  f[0] = expf(f[0]) + erff(f[1]);
  d[0] = log1p(d[0]);
}
)";
  std::string ptx = nvrtc::compile_to_ptx(source, "math.cu");
  EXPECT_TRUE(contains(ptx, ".visible .entry math")) << ptx;
  EXPECT_TRUE(contains(ptx, ".f64")) << "log1p in double precision: " << ptx;
}

TEST(CudaNvrtc, ExtraOptionsArePassedOn) {
  REQUIRE_NVRTC();
  nvrtc::Options options;
  options.extra = {"-DSCALE_BY=3.0f"};
  const char* source = "extern \"C\" __global__ void k(float* x) { x[0] *= SCALE_BY; }\n";
  EXPECT_TRUE(contains(nvrtc::compile_to_ptx(source, "k.cu", options), ".entry k"));
  expect_error([&] { nvrtc::compile_to_ptx(source, "k.cu"); },
               {"[nvrtc] compiling k.cu failed", "SCALE_BY"});
}

TEST(CudaNvrtc, CompilesOnSeveralThreadsAtOnce) {
  REQUIRE_NVRTC();
  std::vector<std::string> ptx(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ptx.size(); ++i)
    threads.emplace_back([&ptx, i] { ptx[i] = nvrtc::compile_to_ptx(kScale, "scale.cu"); });
  for (std::thread& t : threads) t.join();
  for (const std::string& p : ptx) EXPECT_EQ(p, ptx[0]);
  EXPECT_TRUE(contains(ptx[0], ".visible .entry scale"));
}

}  // namespace
}  // namespace kiln::cuda
