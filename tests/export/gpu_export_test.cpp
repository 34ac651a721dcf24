// GPU artifacts (ExportOptions::device = kiln::kCUDA): exported without a GPU (GpuExport: PTX
// and a cubin for sm_90, the graph placed on the GPU, the manifest's device and target, and
// kiln_rt refusing the artifact where there is no GPU), and run through kiln_rt on the fake
// driver (CudaArtifact, the ctest cuda_on_fake_driver): weights uploaded, inputs copied over
// and outputs back, refused on a GPU older than the kernels. The fake driver cannot load PTX,
// so the graphs run there have no fusion group; tests/gpu/device_check.sh runs the rest.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cuda/requirements.h"
#include "export/export_test_util.h"
#include "kiln/artifact/manifest.h"
#include "kiln/cuda/codegen/toolkit.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/stream.h"
#include "kiln/export.h"
#include "kiln/kiln.h"
#include "kiln/models.h"
#include "kiln/serialize/safetensors.h"
#include "kiln_rt.hpp"
#include "test_util.h"
#include "values_close.h"

namespace kiln {
namespace {

using export_test::expect_parts;
using export_test::load_error;
using export_test::read_text;
using export_test::ScratchDir;

bool has_toolkit() {
  try {
    cuda::codegen::find_libdevice();
  } catch (const Error&) {
    return false;
  }
  return !cuda::codegen::find_ptxas().empty();
}

#define REQUIRE_TOOLKIT() \
  if (!has_toolkit()) GTEST_SKIP() << "no CUDA toolkit (libdevice and ptxas)"

TEST(GpuExport, WritesPtxAndACubinForSm90WithoutAGpu) {
  REQUIRE_TOOLKIT();
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present: the export would check on it";
  manual_seed(0);
  // A residual block: its up Linear and ReLU become a GEMM epilogue, the down Linear's bias
  // and the residual add a generated kernel.
  std::shared_ptr<nn::Module> model = models::build(models::MLPConfig{12, 16, 1, 5});
  model->eval();
  ScratchDir scratch("gpu");
  ExportOptions options;
  options.dynamic_batch = true;
  options.device = kCUDA;
  ExportResult r = export_model(model, {randn({4, 12})}, scratch.path("m.kiln"), options);
  EXPECT_EQ(r.unchecked.rfind("not checked against eager: no GPU here (", 0), 0u) << r.unchecked;
  expect_parts(r.summary(), {"cuda target sm_90", "not checked against eager"});

  const artifact::Manifest& m = r.manifest;
  EXPECT_EQ(m.device, "cuda");
  EXPECT_EQ(m.target.arch, "nvptx64");
  EXPECT_EQ(m.target.cpu, "sm_90");
  ASSERT_FALSE(m.graphs.empty());
  const artifact::GraphEntry& g = m.graphs[0];
  EXPECT_GE(g.kernel_count, 1);
  EXPECT_EQ(g.kernels, "kernels0.ptx");
  EXPECT_EQ(g.object, "kernels0.cubin");
  std::string ptx = read_text(scratch.path("m.kiln/kernels0.ptx"));
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(ptx.find(".entry fused_0"), std::string::npos);
  EXPECT_EQ(read_text(scratch.path("m.kiln/kernels0.cubin")).substr(0, 4), "\x7f" "ELF");
  // The graph runs on the GPU, its weights are stored as usual.
  std::string kir = read_text(scratch.path("m.kiln/graph0.kir"));
  EXPECT_NE(kir.find("@cuda:0"), std::string::npos) << kir;
  EXPECT_EQ(artifact::read_manifest(scratch.path("m.kiln")).device, "cuda");

  expect_parts(load_error(scratch.path("m.kiln")),
               {"is a GPU artifact (kernels for sm_90) and this process has no GPU",
                "Fix: run it on a machine with an NVIDIA GPU of compute capability 9.0 or newer"});
}

// A model whose graph has no generated kernel (a linear layer whose bias and ReLU become its
// GEMM's epilogue, and a reshape): the fake driver runs every node of it.
struct Projection : nn::Module {
  nn::ModulePtr<nn::Linear> proj = register_module("proj", std::make_shared<nn::Linear>(12, 6));
  Tensor forward(const Tensor& x) override { return relu(proj(x)).reshape({-1, 2, 3}); }
};

struct Capability {  // the compute capability the fake driver reports, for one test
  explicit Capability(const char* value) { setenv("KILN_FAKE_CUDA_CAPABILITY", value, 1); }
  ~Capability() { unsetenv("KILN_FAKE_CUDA_CAPABILITY"); }
};

TEST(CudaArtifact, RunsThroughKilnRtOnTheGpu) {
  REQUIRE_KERNELS();
  REQUIRE_TOOLKIT();
  manual_seed(1);
  auto model = std::make_shared<Projection>();
  model->eval();
  ScratchDir scratch("gpu");
  ExportOptions options;
  options.dynamic_batch = true;
  options.device = kCUDA;
  ExportResult r = export_model(model, {randn({4, 12})}, scratch.path("m.kiln"), options);
  EXPECT_EQ(r.unchecked, "");  // checked on the GPU
  EXPECT_LE(r.max_abs_diff, 1e-5);
  EXPECT_NE(read_text(scratch.path("m.kiln/graph0.kir")).find("kind=\"gemm\""), std::string::npos);
  kiln_rt::Model rt(scratch.path("m.kiln"));
  // Three calls per batch size: uncaptured, captured as a CUDA graph and replayed, replayed.
  for (int64_t batch : {1, 3, 7, 3, 3, 1, 1}) {
    Tensor x = randn({batch, 12});
    NoGradGuard no_grad;
    Tensor want = (*model)(x);
    std::vector<Tensor> got = export_test::run_rt(rt, {x});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(Shape(got[0].sizes()), Shape(want.sizes()));
    EXPECT_EQ(count_mismatches(got[0].to_vector<double>(), want.to_vector<double>(), 1e-5, 1e-6,
                               "batch " + std::to_string(batch)),
              0);
  }
}

// The C API on device memory: inputs already on the GPU, outputs left there, the work queued
// on the caller's stream; host pointers where device ones belong (and the reverse) are refused.
TEST(CudaArtifact, RunsOnDeviceBuffersThroughTheCApi) {
  REQUIRE_KERNELS();
  REQUIRE_TOOLKIT();
  manual_seed(2);
  auto model = std::make_shared<Projection>();
  model->eval();
  ScratchDir scratch("gpu");
  ExportOptions options;
  options.dynamic_batch = true;
  options.device = kCUDA;
  export_model(model, {randn({4, 12})}, scratch.path("m.kiln"), options);
  kiln_rt_model* rt = kiln_rt_load(scratch.path("m.kiln").c_str());
  ASSERT_NE(rt, nullptr) << kiln_rt_last_error();
  EXPECT_STREQ(kiln_rt_device(rt), "cuda");
  cuda::Stream stream = cuda::Stream::create();
  // Uncaptured, captured as a CUDA graph and replayed, replayed; then another batch size.
  for (int64_t batch : {3, 3, 3, 5}) {
    Tensor x = randn({batch, 12});
    Tensor on_gpu = x.to(kCUDA);
    cuda::synchronize();
    const int64_t shape[2] = {batch, 12};
    kiln_rt_tensor in = {on_gpu.raw_data(), KILN_RT_FLOAT32, 2, shape};
    kiln_rt_outputs* out = kiln_rt_run_on_device(rt, &in, 1, stream.handle());
    ASSERT_NE(out, nullptr) << kiln_rt_last_error();
    const kiln_rt_tensor* y = kiln_rt_outputs_get(out, 0);
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(cuda::device_of_pointer(y->data), 0) << "the output stays on the GPU";
    stream.synchronize();
    Tensor got = Tensor::from_blob(y->data, std::vector<int64_t>(y->shape, y->shape + y->rank),
                                   static_cast<DType>(y->dtype), {}, {}, kCUDA)
                     .to(kCPU);
    kiln_rt_outputs_free(out);
    NoGradGuard no_grad;
    Tensor want = (*model)(x);
    ASSERT_EQ(Shape(got.sizes()), Shape(want.sizes()));
    EXPECT_EQ(count_mismatches(got.to_vector<double>(), want.to_vector<double>(), 1e-5, 1e-6,
                               "batch " + std::to_string(batch)),
              0);
  }
  // Host data to the device entry point, device data to the host one.
  std::vector<float> host(3 * 12, 0.5f);
  Tensor on_gpu = randn({3, 12}).to(kCUDA);
  const int64_t shape[2] = {3, 12};
  kiln_rt_tensor from_host = {host.data(), KILN_RT_FLOAT32, 2, shape};
  EXPECT_EQ(kiln_rt_run_on_device(rt, &from_host, 1, nullptr), nullptr);
  expect_parts(kiln_rt_last_error(),
               {"[kiln_rt] kiln_rt_run_on_device: input 0's data is host memory, expected memory "
                "of cuda:0",
                "Fix: pass a device pointer on that GPU, or host data to kiln_rt_run"});
  kiln_rt_tensor from_gpu = {on_gpu.raw_data(), KILN_RT_FLOAT32, 2, shape};
  EXPECT_EQ(kiln_rt_run(rt, &from_gpu, 1), nullptr);
  expect_parts(kiln_rt_last_error(),
               {"[kiln_rt] kiln_rt_run: input 0's data is memory of cuda:0, expected host memory",
                "Fix: pass device pointers to kiln_rt_run_on_device"});
  kiln_rt_free(rt);

  // A CPU artifact has no device entry point.
  ExportOptions on_cpu;
  export_model(model, {randn({4, 12})}, scratch.path("cpu.kiln"), on_cpu);
  kiln_rt::Model cpu_model(scratch.path("cpu.kiln"));
  EXPECT_EQ(cpu_model.device(), "cpu");
  try {
    cpu_model.run_on_device({kiln_rt::Model::input(host.data(), {3, 12})});
    ADD_FAILURE() << "a CPU artifact ran on device buffers";
  } catch (const kiln_rt::Error& e) {
    expect_parts(e.what(), {"runs on the cpu: its inputs and outputs are host memory",
                            "Fix: call kiln_rt_run, or export the model with `kiln export "
                            "--device cuda`"});
  }
}

TEST(CudaArtifact, AGpuOlderThanTheKernelsIsRefused) {
  REQUIRE_KERNELS();
  REQUIRE_TOOLKIT();
  auto model = std::make_shared<Projection>();
  model->eval();
  ScratchDir scratch("gpu");
  ExportOptions options;
  options.device = kCUDA;
  export_model(model, {randn({4, 12})}, scratch.path("m.kiln"), options);
  Capability ampere("8.0");
  expect_parts(load_error(scratch.path("m.kiln")),
               {"the kernels were compiled for sm_90, and GPU 0 (kiln fake GPU) is sm_80, older",
                "Fix: run it on a GPU of compute capability 9.0 or newer"});
}

// Writes the GPU artifacts tests/gpu/device_check.sh runs on a GPU (tests/gpu/prepare.sh sets
// KILN_GPU_ARTIFACTS): seed models exported for the GPU, each NAME.kiln with
// NAME.reference.safetensors beside it holding an input "x" and the CPU's output "y" for it
// (tests/cuda/artifact_test.cpp runs them).
TEST(GpuExport, WritesTheDeviceCheckArtifacts) {
  const char* dir = std::getenv("KILN_GPU_ARTIFACTS");
  if (!dir) GTEST_SKIP() << "KILN_GPU_ARTIFACTS is not set (tests/gpu/prepare.sh sets it)";
  REQUIRE_TOOLKIT();
  struct Seed {
    const char* name;
    std::shared_ptr<nn::Module> model;
    Shape input;
  };
  manual_seed(0);
  std::vector<Seed> seeds = {
      {"residual_mlp", models::build_model("residual_mlp"), {8, 1, 28, 28}},
      {"batch_norm_cnn", models::build_model("batch_norm_cnn"), {8, 1, 28, 28}},
      {"transformer_classifier", models::build_model("transformer_classifier"), {8, 1, 28, 28}},
  };
  std::filesystem::create_directories(dir);
  for (Seed& seed : seeds) {
    seed.model->eval();
    Tensor x = randn(seed.input);
    Tensor y;
    {
      NoGradGuard no_grad;
      y = (*seed.model)(x);
    }
    ExportOptions options;
    options.dynamic_batch = true;
    options.device = kCUDA;
    options.model_name = seed.name;
    std::string base = std::string(dir) + "/" + seed.name;
    ExportResult r = export_model(seed.model, {x}, base + ".kiln", options);
    save_safetensors(base + ".reference.safetensors", {{"x", x}, {"y", y}});
    std::cout << r.summary();
  }
}

// The elementwise chain of the GPU targets, relu(x * a + b) * c - d, compiled into one kernel.
struct Chain : nn::Module {
  Tensor forward(const Tensor& x) override { return relu(x * 1.5 + 0.25) * 2.0 - 0.5; }
};

struct Softmax : nn::Module {
  Tensor forward(const Tensor& x) override { return nn::functional::softmax(x, -1); }
};

// Writes the artifacts bench/gpu/bench_gpu.cpp times on a GPU (tests/gpu/prepare.sh sets
// KILN_GPU_BENCH_ARTIFACTS): the elementwise chain, softmax and layer_norm rows of width 4096,
// and a BERT-sized encoder (6 layers of d384, 12 heads, FFN 1536), each with a dynamic batch.
// The encoder's weights are constants: its 42 MB then compress to almost nothing for the trip
// to the GPU machine, and its speed does not depend on them.
TEST(GpuExport, WritesTheGpuBenchArtifacts) {
  const char* dir = std::getenv("KILN_GPU_BENCH_ARTIFACTS");
  if (!dir) GTEST_SKIP() << "KILN_GPU_BENCH_ARTIFACTS is not set (tests/gpu/prepare.sh sets it)";
  REQUIRE_TOOLKIT();
  nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = 1536;
  o.dropout = 0;
  o.batch_first = true;
  auto encoder = std::make_shared<nn::TransformerEncoder>(
      std::make_shared<nn::TransformerEncoderLayer>(384, 12, o), 6);
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : encoder->named_parameters())
      if (name.find("norm") == std::string::npos) p.fill_(0.01);
  }
  struct Bench {
    const char* name;
    std::shared_ptr<nn::Module> model;
    Shape example;
  };
  std::vector<Bench> benches = {
      {"chain", std::make_shared<Chain>(), {8, 1024}},
      {"softmax", std::make_shared<Softmax>(), {8, 4096}},
      {"layer_norm", std::make_shared<nn::LayerNorm>(4096), {8, 4096}},
      {"encoder", encoder, {2, 128, 384}},
  };
  std::filesystem::create_directories(dir);
  for (Bench& b : benches) {
    b.model->eval();
    ExportOptions options;
    options.dynamic_batch = true;
    options.device = kCUDA;
    options.model_name = b.name;
    ExportResult r = export_model(b.model, {randn(b.example)}, std::string(dir) + "/" + b.name + ".kiln",
                                  options);
    std::cout << r.summary();
  }
}

}  // namespace
}  // namespace kiln
