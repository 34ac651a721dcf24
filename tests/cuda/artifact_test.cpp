// GPU artifacts exported on the build machine (tests/gpu/prepare.sh writes them with the
// code generator, see tests/export/gpu_export_test.cpp) run through kiln_rt on a real GPU
// against the CPU's results (the first call, the captured one and a replay of the CUDA graph),
// and the time of a batch-1 call, host tensors in and out, with and without CUDA graph replay,
// is printed for docs/perf.md. tests/gpu/device_check.sh runs it with KILN_GPU_ARTIFACTS set.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cuda/requirements.h"
#include "kiln/kiln.h"
#include "kiln/serialize/safetensors.h"
#include "kiln_rt.hpp"
#include "values_close.h"

namespace kiln {
namespace {

std::vector<Tensor> run_artifact(const kiln_rt::Model& model, const Tensor& x) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  std::vector<kiln_rt::Input> inputs = {{x.raw_data(), static_cast<kiln_rt_dtype>(x.dtype()), shape}};
  kiln_rt::Outputs out = model.run(inputs);
  std::vector<Tensor> result;
  for (size_t i = 0; i < out.size(); ++i) {
    const kiln_rt_tensor& t = out[i];
    std::vector<int64_t> dims(t.shape, t.shape + t.rank);
    result.push_back(Tensor::from_blob(t.data, dims, static_cast<DType>(t.dtype)).clone());
  }
  return result;
}

// Batch 1, host in and host out (two copies and a synchronization per call): the median of 200
// calls after 20 warm-up calls, in µs. `graphs`: replayed as a CUDA graph (the default), or
// not (KILN_CUDA_GRAPHS=0, read when the model loads).
double batch1_us(const std::string& path, const Tensor& one, bool graphs) {
  if (!graphs) setenv("KILN_CUDA_GRAPHS", "0", 1);
  kiln_rt::Model model(path);
  unsetenv("KILN_CUDA_GRAPHS");
  std::vector<double> us;
  for (int i = 0; i < 220; ++i) {
    auto start = std::chrono::steady_clock::now();
    run_artifact(model, one);
    double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (i >= 20) us.push_back(t);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

TEST(CudaArtifact, ExportedSeedModelsMatchTheCpuOnTheGpu) {
  const char* dir = std::getenv("KILN_GPU_ARTIFACTS");
  if (!dir) GTEST_SKIP() << "KILN_GPU_ARTIFACTS is not set (tests/gpu/device_check.sh sets it)";
  REQUIRE_PTX();
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".kiln") continue;
    const std::string name = entry.path().stem().string();
    SafetensorsFile reference =
        load_safetensors((entry.path().parent_path() / (name + ".reference.safetensors")).string());
    const Tensor& x = *reference.find("x");
    const Tensor& y = *reference.find("y");
    kiln_rt::Model model(path);
    // The first call runs the graph, the second captures and replays it, the third replays.
    for (int call = 0; call < 3; ++call) {
      std::vector<Tensor> got = run_artifact(model, x);
      ASSERT_EQ(got.size(), 1u) << name;
      EXPECT_EQ(count_mismatches(got[0].to_vector<double>(), y.to_vector<double>(), 1e-4, 1e-4,
                                 name + " call " + std::to_string(call)),
                0);
    }
    Tensor one = x.slice(0, 0, 1).contiguous();
    const double replayed = batch1_us(path, one, true), uncaptured = batch1_us(path, one, false);
    std::cout << "[kiln_rt gpu] " << name << ": batch 1, " << replayed
              << " us per call replayed as a CUDA graph, " << uncaptured
              << " us without (medians of 200, host tensors in and out)\n";
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no .kiln artifact in " << dir;
}

}  // namespace
}  // namespace kiln
