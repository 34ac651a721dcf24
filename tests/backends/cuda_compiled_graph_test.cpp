// The compiled backend "cuda".
//
// Without any GPU (CudaCompiledGraph): graphs of GPU tensors, written as IR, go through the
// passes with the GPU's fusion rules; their fusion groups become one PTX module that ptxas
// assembles for sm_90; host scalar constants read by groups move to the GPU; refusals and the
// default backend per device.
//
// On the fake driver (CudaCompiled, the ctest cuda_on_fake_driver): whole models compiled
// with kiln::compile on GPU tensors against eager on the GPU and on the CPU. The fake driver
// runs the eager kernels (built on the host) but cannot load PTX, so these tests register the
// backend again as "cuda_emulated", whose fusion groups run the code generator's same kernels
// emulated on the host (kiln/cuda/codegen/emulation.h) on the fake driver's device memory. On
// a real GPU they use "cuda" itself.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "cuda/fake_driver/fake_memory.h"
#include "cuda/requirements.h"
#include "kiln/backends/backend.h"
#include "kiln/cuda/codegen/emulation.h"
#include "kiln/cuda/codegen/toolkit.h"
#include "kiln/cuda/compiler/cuda_backend.h"
#include "kiln/cuda/exec/gemm_epilogue.h"
#include "kiln/cuda/graph_capture.h"
#include "kiln/cuda/stream.h"
#include "kiln/kiln.h"
#include "kiln/models.h"
#include "kiln/ops/fused.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln {
namespace {

using cpu::exec::FusedKernelSpec;
using cuda::compiler::CompiledGraph;
using cuda::compiler::CompilerOptions;

// libdevice (for any PTX) and ptxas (to assemble it): the CUDA toolkit.
std::string toolkit_missing() {
  try {
    cuda::codegen::find_libdevice();
  } catch (const Error& e) {
    return std::string("no CUDA toolkit: ") + e.what();
  }
  if (cuda::codegen::find_ptxas().empty()) return "no CUDA toolkit: no ptxas";
  return "";
}

#define REQUIRE_TOOLKIT()                                  \
  do {                                                     \
    if (std::string why = toolkit_missing(); !why.empty()) \
      GTEST_SKIP() << why;                                 \
  } while (0)

// A block of a model on GPU 0: a linear layer, a host scalar, a broadcast, a softmax row, and
// another linear layer with a ReLU.
constexpr const char* kBlock = R"(graph block {
  input %0 "x": float32[8, 16]@cuda:0
  param %1 "w": float32[16, 32]@cuda:0
  param %2 "b": float32[32]@cuda:0
  const %3 "scalar0": float32[] = [0.5]
  param %9 "w2": float32[32, 4]@cuda:0
  %4: float32[8, 32]@cuda:0 = matmul(%0, %1) {}
  %5: float32[8, 32]@cuda:0 = add(%4, %2) {}
  %6: float32[8, 32]@cuda:0 = mul(%5, %3) {}
  %7: float32[8, 32]@cuda:0 = tanh(%6) {}
  %8: float32[8, 32]@cuda:0 = softmax(%7) {dim=-1}
  %10: float32[8, 4]@cuda:0 = matmul(%8, %9) {}
  %11: float32[8, 4]@cuda:0 = relu(%10) {}
  return %11
})";

// Compiles `ir` for the cuda backend without a GPU: the loader assembles the PTX with ptxas
// and hands back a launcher that must not be called.
std::unique_ptr<CompiledGraph> compile_without_gpu(const char* ir, std::string* cubin_log = nullptr) {
  CompilerOptions options;
  options.verify_passes = true;
  options.load = [cubin_log](const cuda::codegen::PtxModule& module,
                             std::span<const FusedKernelSpec>, Device) {
    cuda::codegen::Cubin cubin = cuda::codegen::assemble_cubin(module.ptx, module.chip, true);
    EXPECT_FALSE(cubin.image.empty());
    if (cubin_log) *cubin_log = cubin.log;
    return [](const std::string& name, std::span<void* const>, std::span<const int64_t>) {
      ADD_FAILURE() << "kernel " << name << " launched without a GPU";
    };
  };
  return std::make_unique<CompiledGraph>(*ir::parse_graph(ir), options);
}

TEST(CudaCompiledGraph, FusionGroupsBecomeOnePtxModuleThatPtxasAssembles) {
  REQUIRE_TOOLKIT();
  init();
  std::string log;
  std::unique_ptr<CompiledGraph> compiled = compile_without_gpu(kBlock, &log);
  const cuda::compiler::CompileStats& stats = compiled->stats();
  // bias, scale, tanh and the softmax in one row group; the first matmul stays an eager node
  // (cuBLASLt), the second and its ReLU become one cuBLASLt call with a ReLU epilogue. The
  // softmax's decomposition adds a host scalar (1).
  const std::string text = ir::print_graph(compiled->optimized_graph());
  EXPECT_EQ(stats.kernels, 1) << text;
  EXPECT_EQ(stats.fused_ops, 9);
  EXPECT_EQ(stats.gemm_epilogues, 1);
  EXPECT_EQ(stats.other_nodes, 1);
  EXPECT_EQ(stats.host_scalars, 2);
  EXPECT_EQ(stats.chip, "sm_90");
  const ir::Node& last = *compiled->optimized_graph().nodes().back();
  std::optional<cuda::exec::GemmGroup> gemm = cuda::exec::gemm_group(last);
  ASSERT_TRUE(gemm) << text;
  EXPECT_FALSE(gemm->bias);
  EXPECT_EQ(gemm->activation, cuda::GemmActivation::Relu);
  EXPECT_NE(text.find("{kind=\"gemm\"}"), std::string::npos) << text;
  const cuda::codegen::PtxModule& ptx = compiled->ptx();
  ASSERT_EQ(ptx.kernels.size(), 1u);
  EXPECT_EQ(ptx.kernels[0].kind, cuda::FusedKernelKind::Rows);
  for (const cuda::FusedKernelInfo& k : ptx.kernels)
    EXPECT_NE(ptx.ptx.find(".entry " + k.name), std::string::npos) << k.name;
  EXPECT_NE(log.find("fused_0"), std::string::npos) << log;  // ptxas -v names each kernel
  // What a loader derives from the graph alone (kiln_rt) is what the generator reported.
  std::vector<cuda::FusedKernelInfo> derived = cuda::exec::fused_kernel_infos(compiled->optimized_graph());
  ASSERT_EQ(derived.size(), ptx.kernels.size());
  for (size_t i = 0; i < derived.size(); ++i) {
    EXPECT_EQ(derived[i].name, ptx.kernels[i].name);
    EXPECT_EQ(derived[i].kind, ptx.kernels[i].kind) << i;
    EXPECT_EQ(derived[i].buffers, ptx.kernels[i].buffers) << i;
    EXPECT_EQ(derived[i].dims, ptx.kernels[i].dims) << i;
  }
  std::string summary = compiled->summary();
  for (const char* part : {"passes ", "ptx ", "load ", "1 kernels (9 ops)", "1 GEMM epilogues",
                           "1 other nodes",
                           "2 host scalars moved to the GPU", "; sm_90"})
    EXPECT_NE(summary.find(part), std::string::npos) << part << " in " << summary;
  // The scalar the group reads is now a constant on the GPU, in the group's region too (its
  // data moves there before the first run).
  const ir::Graph& g = compiled->optimized_graph();
  int constants = 0;
  for (const ir::GraphInput& in : g.inputs())
    if (in.kind == ir::InputKind::Constant) {
      EXPECT_TRUE(in.value->type.device.is_cuda()) << in.name;
      ++constants;
    }
  EXPECT_EQ(constants, 2);
  ir::verify(g);
}

// A linear layer x · wᵀ + b followed by `act` (an op line reading %5, writing %6; empty: none),
// and whether the compiler makes its bias and activation a cuBLASLt epilogue.
std::string linear_then(const std::string& act, const std::string& bias_type = "float32[6]",
                        const std::string& dtype = "float32") {
  return "graph linear {\n  input %0 \"x\": " + dtype + "[4, 5]@cuda:0\n  param %1 \"w\": " +
         dtype + "[6, 5]@cuda:0\n  param %2 \"b\": " + bias_type +
         "@cuda:0\n  %3: " + dtype + "[5, 6]@cuda:0 = permute(%1) {dims=[1, 0]}\n  %4: " + dtype +
         "[4, 6]@cuda:0 = matmul(%0, %3) {}\n  %5: " + dtype +
         "[4, 6]@cuda:0 = add(%4, %2) {}\n" + (act.empty() ? "" : "  " + act + "\n") +
         "  return " + (act.empty() ? "%5" : "%6") + "\n}";
}

TEST(CudaCompiledGraph, ALinearLayersBiasAndActivationBecomeItsGemmsEpilogue) {
  REQUIRE_TOOLKIT();
  init();
  auto epilogues = [](const std::string& ir) {
    std::unique_ptr<CompiledGraph> compiled = compile_without_gpu(ir.c_str());
    ir::verify(compiled->optimized_graph());
    return compiled->stats().gemm_epilogues;
  };
  EXPECT_EQ(epilogues(linear_then("")), 1);
  EXPECT_EQ(epilogues(linear_then("%6: float32[4, 6]@cuda:0 = relu(%5) {}")), 1);
  EXPECT_EQ(epilogues(linear_then("%6: float32[4, 6]@cuda:0 = gelu(%5) {tanh=true}")), 1);
  // What stays a kernel: float64 (epilogues are float32 here), GELU with erf (cuBLASLt's is the
  // tanh form), a bias that is not one value per column, more ops.
  EXPECT_EQ(epilogues(linear_then("", "float64[6]", "float64")), 0);
  EXPECT_EQ(epilogues(linear_then("%6: float32[4, 6]@cuda:0 = gelu(%5) {tanh=false}")), 0);
  EXPECT_EQ(epilogues(linear_then("", "float32[1, 6]")), 0);
  EXPECT_EQ(epilogues(linear_then("%6: float32[4, 6]@cuda:0 = tanh(%5) {}")), 0);
  EXPECT_EQ(epilogues(linear_then("%6: float32[4, 6]@cuda:0 = mul(%5, %4) {}")), 0);
  // The product also returned: the matmul must stay.
  std::string returned = linear_then("");
  returned.replace(returned.find("  return %5"), 11, "  return %5, %4");
  EXPECT_EQ(epilogues(returned), 0);
}

TEST(CudaCompiledGraph, DynamicDimsStayKernelParameters) {
  REQUIRE_TOOLKIT();
  init();
  std::unique_ptr<CompiledGraph> compiled = compile_without_gpu(R"(graph dyn {
  input %0 "x": float32[s0, 64]@cuda:0
  input %1 "g": float32[64]@cuda:0
  %2: float32[s0, 64]@cuda:0 = mul(%0, %1) {}
  %3: float32[s0, 64]@cuda:0 = relu(%2) {}
  %4: float32[s0, 64]@cuda:0 = log_softmax(%3) {dim=-1}
  return %4
})");
  // One row group (the scale, ReLU and log_softmax); s0 is a kernel parameter like every
  // dim.
  EXPECT_EQ(compiled->stats().kernels, 1);
  ASSERT_EQ(compiled->ptx().kernels.size(), 1u);
  EXPECT_EQ(compiled->ptx().kernels[0].dims, 2u);
}

TEST(CudaCompiledGraph, RefusesWhatItCannotRunAndSaysWhy) {
  init();
  auto refusal = [](const char* ir) {
    return cuda::compiler::refusal(*ir::parse_graph(ir)).value_or("(none)");
  };
  EXPECT_EQ(refusal(kBlock), "(none)");
  EXPECT_EQ(refusal(R"(graph cpu {
  input %0 "x": float32[4]
  %1: float32[4] = relu(%0) {}
  return %1
})"),
            "%0 is float32[4], and it runs only GPU tensors (and 0-d host scalars fed to them)");
  EXPECT_EQ(refusal(R"(graph two {
  input %0 "x": float32[4]@cuda:0
  input %1 "y": float32[4]@cuda:1
  %2: float32[4]@cuda:0 = relu(%0) {}
  return %2
})"),
            "%1 is float32[4]@cuda:1, and another value is on cuda:0: a compiled graph runs on "
            "one GPU");
  EXPECT_EQ(refusal(R"(graph scalars {
  input %0 "s": float32[]
  %1: float32[] = relu(%0) {}
  return %1
})"),
            "%1 is float32[], and it runs only GPU tensors (and 0-d host scalars fed to them)");
  expect_error([] { compile_without_gpu(R"(graph cpu {
  input %0 "x": float32[4]
  %1: float32[4] = relu(%0) {}
  return %1
})"); },
               {"[cuda] cannot compile graph cpu: %0 is float32[4]", "Fix: move the model"});
}

TEST(CudaCompiledGraph, TheDefaultBackendFollowsTheDevice) {
  init();
  std::unique_ptr<ir::Graph> gpu = ir::parse_graph(kBlock);
  EXPECT_EQ(backends::choose_backend(nullptr, *gpu, "").backend->name(), "cuda");
  std::unique_ptr<ir::Graph> cpu = ir::parse_graph(R"(graph cpu {
  input %0 "x": float32[4]
  %1: float32[4] = relu(%0) {}
  return %1
})");
  EXPECT_EQ(backends::choose_backend(nullptr, *cpu, "").backend->name(), "cpu");
  // Named, it is asked: a CPU graph goes to the reference executor with the reason.
  backends::Choice named = backends::choose_backend(&backends::backend("cuda"), *cpu, "");
  EXPECT_EQ(named.backend, &backends::reference_backend());
  EXPECT_NE(named.note.find("the cuda backend cannot run this graph: %0 is float32[4]"),
            std::string::npos)
      << named.note;
}

// ---- Whole models on a GPU (the fake driver, or a real one) ----

// Loads a graph's kernels to run emulated on the host, on the fake driver's memory.
cuda::compiler::KernelLoader emulated_loader() {
  return [](const cuda::codegen::PtxModule& module, std::span<const FusedKernelSpec> specs,
            Device) -> cuda::exec::FusedLauncher {
    std::shared_ptr<cuda::codegen::EmulatedKernels> kernels = cuda::codegen::emulate_on_cpu(specs);
    std::vector<cuda::FusedKernelInfo> infos = module.kernels;
    return [kernels, infos](const std::string& name, std::span<void* const> buffers,
                            std::span<const int64_t> dims) {
      std::vector<void*> host;
      for (void* b : buffers) host.push_back(cuda::fake::host_address<void>(b));
      const cuda::FusedKernelInfo* info = nullptr;
      for (const cuda::FusedKernelInfo& k : infos)
        if (k.name == name) info = &k;
      ASSERT_NE(info, nullptr) << name;
      // As many blocks as the GPU launch would have (an H100's 132 SMs on the fake driver).
      int64_t blocks = cuda::launch_geometry(*info, dims, 132).grid;
      // In stream order, so that a CUDA graph capture records it as a kernel would be.
      cuda::launch_host_func(cuda::current_stream(0),
                             [kernels, name, host, blocks, dims = std::vector<int64_t>(dims.begin(), dims.end())] {
                               kernels->run(name, host, dims, blocks);
                             });
    };
  };
}

// The backend that runs fusion groups on this GPU: "cuda" on a real one; on the fake driver
// "cuda_emulated", the same compiler whose kernels run emulated on the host.
std::string gpu_backend() {
  if (!cuda::on_fake_driver()) return "cuda";
  static std::once_flag once;
  std::call_once(once, [] {
    backends::register_backend(cuda::compiler::make_backend("cuda_emulated", emulated_loader()));
  });
  return "cuda_emulated";
}

#define REQUIRE_COMPILED_GPU() \
  do {                         \
    REQUIRE_KERNELS();         \
    REQUIRE_TOOLKIT();         \
  } while (0)

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(Shape(got.sizes()), Shape(want.sizes())) << what;
  EXPECT_EQ(got.device(), want.device()) << what;
  EXPECT_EQ(count_mismatches(got.to(kCPU).to_vector<double>(), want.to(kCPU).to_vector<double>(),
                             rtol, atol, what),
            0);
}

// The backend note of the latest graph ("cuda_emulated: passes ..., 3 kernels ...").
std::string backend_note(const ExplainReport& r) {
  return r.entries.empty() ? std::string() : r.entries.back().backend;
}

struct Block : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(24, 48));
  nn::ModulePtr<nn::LayerNorm> norm = register_module("norm", std::make_shared<nn::LayerNorm>(48));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(48, 10));
  Tensor forward(const Tensor& x) override {
    Tensor h = gelu(fc1(x)) * 0.5 + 1.0;  // host scalars next to GPU tensors
    return nn::functional::log_softmax(fc2(relu(norm(h))) + h.mean({1}, true), -1);
  }
};

TEST(CudaCompiled, ModelsMatchEagerOnTheGpuAndTheCpu) {
  REQUIRE_COMPILED_GPU();
  manual_seed(3);
  auto model = std::make_shared<Block>();
  Tensor x = randn({16, 24});
  Tensor on_cpu = (*model)(x);
  model->to(kCUDA);
  NoGradGuard no_grad;
  Tensor xg = x.to(kCUDA);
  Tensor eager = (*model)(xg);
  auto compiled = compile(model, {.backend = gpu_backend()});
  Tensor fast = compiled(xg);
  expect_close(fast, eager, 1e-5, 1e-5, "compiled vs eager on the GPU");
  expect_close(fast.to(kCPU), on_cpu, 1e-4, 1e-5, "compiled on the GPU vs the CPU");
  std::string note = backend_note(explain(compiled));
  EXPECT_EQ(note.rfind(gpu_backend() + ": passes ", 0), 0u) << note;
  EXPECT_NE(note.find("host scalars moved to the GPU"), std::string::npos) << note;
  // What the call launched: each fusion group once, and one cuBLASLt call per linear layer.
  std::smatch kernels, launched;
  ASSERT_TRUE(std::regex_search(note, kernels, std::regex(R"((\d+) kernels \()"))) << note;
  ASSERT_TRUE(std::regex_search(
      note, launched,
      std::regex(R"(\((\d+) generated kernels, (\d+) eager kernels, (\d+) library calls\))")))
      << note;
  EXPECT_EQ(kernels[1], launched[1]) << note;
  EXPECT_EQ(launched[3], "2") << note;
  // Again from the cache: the same graph, the same results.
  expect_close(compiled(xg), eager, 1e-5, 1e-5, "second call");
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
}

// The replay line of the latest graph's note: "replayed as a CUDA graph (...)" or "graph replay
// off: ...".
std::string replay_line(const std::string& note) {
  size_t at = note.find("replayed as a CUDA graph");
  if (at == std::string::npos) at = note.find("graph replay off");
  return at == std::string::npos ? "" : note.substr(at);
}

TEST(CudaCompiled, RepeatedCallsReplayAsOneCudaGraphAndReturnFreshTensors) {
  REQUIRE_COMPILED_GPU();
  manual_seed(5);
  auto model = std::make_shared<Block>();
  model->to(kCUDA);
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = gpu_backend()});
  std::vector<Tensor> inputs, results;
  for (int call = 0; call < 4; ++call) {  // a warm-up, a capture and its replay, two replays
    inputs.push_back(randn({16, 24}).to(kCUDA));
    results.push_back(compiled(inputs.back()));
  }
  // Every result is its own call's: a replay copies the graph's outputs into fresh tensors.
  for (size_t call = 0; call < inputs.size(); ++call)
    expect_close(results[call], (*model)(inputs[call]), 1e-5, 1e-5, "call " + std::to_string(call));
  EXPECT_EQ(replay_line(backend_note(explain(compiled))),
            "replayed as a CUDA graph (1 captured, 3 replays; 3 launches per replay: 1 input copy, "
            "the graph, 1 output copy)");
  // Parameters are read in place: an update (an optimizer step) reaches the next replay.
  model->fc2->bias.copy_(full({10}, 0.75).to(kCUDA));
  Tensor x = randn({16, 24}).to(kCUDA);
  expect_close(compiled(x), (*model)(x), 1e-5, 1e-5, "after the bias changed");
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
}

struct Mlp : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(12, 32));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 16));
  nn::ModulePtr<nn::Linear> fc3 = register_module("fc3", std::make_shared<nn::Linear>(16, 3));
  Tensor forward(const Tensor& x) override {
    return fc3(gelu(fc2(relu(fc1(x))), GeluApproximation::Tanh));
  }
};

TEST(CudaCompiled, LinearLayersRunAsGemmsWithTheirBiasAndActivationAsEpilogues) {
  REQUIRE_COMPILED_GPU();
  manual_seed(7);
  auto model = std::make_shared<Mlp>();
  Tensor x = randn({9, 12});
  Tensor on_cpu = (*model)(x);
  model->to(kCUDA);
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = gpu_backend()});
  Tensor xg = x.to(kCUDA);
  for (int call = 0; call < 3; ++call)
    expect_close(compiled(xg).to(kCPU), on_cpu, 1e-4, 1e-5, "call " + std::to_string(call));
  std::string note = backend_note(explain(compiled));
  // fc1 + ReLU, fc2 + GELU and fc3 + its bias: three cuBLASLt calls and nothing else.
  EXPECT_NE(note.find("0 kernels (0 ops), 3 GEMM epilogues"), std::string::npos) << note;
  EXPECT_NE(note.find("3 launches per call (0 generated kernels, 0 eager kernels, 3 library "
                      "calls)"),
            std::string::npos)
      << note;
}

struct Lookup : nn::Module {
  nn::ModulePtr<nn::Embedding> embed = register_module("embed", std::make_shared<nn::Embedding>(10, 8));
  nn::ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  Tensor forward(const Tensor& ids) override { return relu(drop(embed(ids))) * 2.0; }
};

TEST(CudaCompiled, IndexChecksRunAfterEachReplayAndFreshRandomNumbersAreNotReplayed) {
  REQUIRE_COMPILED_GPU();
  manual_seed(6);
  auto model = std::make_shared<Lookup>();
  model->to(kCUDA);
  model->eval();
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = gpu_backend()});
  // The embedding checks its indices on the GPU; a replay reads the check back after it ran.
  for (int call = 0; call < 3; ++call) {
    Tensor ids = Tensor::from_vector<int64_t>({1, 4, 9, call}, {2, 2}).to(kCUDA);
    expect_close(compiled(ids), (*model)(ids), 1e-6, 1e-6, "call " + std::to_string(call));
  }
  EXPECT_EQ(replay_line(backend_note(explain(compiled))).rfind("replayed as a CUDA graph (1 captured, 2 replays", 0),
            0u)
      << backend_note(explain(compiled));
  // A bad index in a replayed call fails with the eager kernel's message, and the next call
  // replays as before.
  Tensor bad = Tensor::from_vector<int64_t>({1, 12, 3, 4}, {2, 2}).to(kCUDA);
  expect_error([&] { compiled(bad); },
               {"[embedding] index 12 (element 1 of indices", "embedding table of 10 rows"});
  Tensor ids = Tensor::from_vector<int64_t>({0, 1, 2, 3}, {2, 2}).to(kCUDA);
  expect_close(compiled(ids), (*model)(ids), 1e-6, 1e-6, "after the bad call");
  // Training mode: dropout draws new numbers per call, which a replay would repeat.
  model->train();
  auto trained = compile(model, {.backend = gpu_backend()});
  Tensor row = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4}).to(kCUDA);
  trained(row);
  trained(row);
  EXPECT_EQ(replay_line(backend_note(explain(trained))),
            "graph replay off: dropout draws new random numbers each call, which a replay would "
            "repeat");
}

struct Views : nn::Module {
  Tensor scale = register_parameter("scale", randn({1, 6}));
  Tensor forward(const Tensor& x) override {
    Tensor t = x.transpose(0, 1);  // a strided view into a fusion group
    Tensor y = relu(t * scale - 0.25);
    return nn::functional::softmax(y * y.slice(1, 0, 1), 1) + y.sum({0}, true);
  }
};

TEST(CudaCompiled, ViewsBroadcastsAndDynamicSizesRunOneGraph) {
  REQUIRE_COMPILED_GPU();
  manual_seed(4);
  auto model = std::make_shared<Views>();
  model->to(kCUDA);
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = gpu_backend()});
  for (int64_t n : {5, 9, 3, 1}) {
    Tensor x = mark_dynamic(randn({6, n}).to(kCUDA), 1);
    expect_close(compiled(x), (*model)(x), 1e-5, 1e-6, "n = " + std::to_string(n));
  }
  // n = 1 is a static size of its own (sizes 0 and 1 stay static); the others share one graph.
  EXPECT_EQ(explain(compiled).graph_count(), 2u);
}

// Two matmuls with a softmax row and elementwise work between them, on GPU 0.
constexpr const char* kChain = R"(graph chain {
  input %0 "x": float32[8, 16]@cuda:0
  param %1 "w": float32[16, 32]@cuda:0
  param %2 "w2": float32[32, 32]@cuda:0
  %3: float32[8, 32]@cuda:0 = matmul(%0, %1) {}
  %4: float32[8, 32]@cuda:0 = tanh(%3) {}
  %5: float32[32]@cuda:0 = sum(%4) {dims=[0], keepdim=false}
  %6: float32[8, 32]@cuda:0 = exp(%4) {}
  %7: float32[8, 32]@cuda:0 = softmax(%6) {dim=-1}
  %8: float32[8, 32]@cuda:0 = matmul(%7, %2) {}
  %9: float32[8, 32]@cuda:0 = mul(%8, %5) {}
  %10: float32[8]@cuda:0 = sum(%9) {dims=[1], keepdim=false}
  return %10
})";

// A call's intermediates live in one device arena, placed by liveness: one allocation for all
// of them instead of one per value, with the same results as the node loop that allocates each
// value on its own.
TEST(CudaCompiled, IntermediatesShareOneDeviceArenaPerCall) {
  REQUIRE_COMPILED_GPU();
  init();
  CompilerOptions options;
  options.verify_passes = true;
  if (cuda::on_fake_driver()) options.load = emulated_loader();
  CompiledGraph planned(*ir::parse_graph(kChain), options);
  CompiledGraph op_by_op(*ir::parse_graph(kChain), options);
  op_by_op.set_device_plan(false);
  ASSERT_TRUE(planned.uses_device_plan());
  EXPECT_FALSE(op_by_op.uses_device_plan());
  // Allocations a call makes through the device allocator.
  auto allocations = [](CompiledGraph& g, const std::vector<Tensor>& in, Tensor& out) {
    cuda::synchronize();
    const AllocatorStats before = cuda::memory_stats(0);
    out = g.run(in)[0];
    cuda::synchronize();
    const AllocatorStats after = cuda::memory_stats(0);
    return (after.cache_hits + after.cache_misses) - (before.cache_hits + before.cache_misses);
  };
  for (int call = 0; call < 2; ++call) {  // uncaptured, then captured as a CUDA graph
    manual_seed(40 + call);
    std::vector<Tensor> in{randn({8, 16}).to(kCUDA), randn({16, 32}).to(kCUDA),
                           randn({32, 32}).to(kCUDA)};
    Tensor fast, slow;
    const uint64_t arena = allocations(planned, in, fast);
    const uint64_t per_value = allocations(op_by_op, in, slow);
    const std::string what = "call " + std::to_string(call);
    EXPECT_EQ(count_mismatches(fast.to(kCPU).to_vector<double>(), slow.to(kCPU).to_vector<double>(),
                               0, 0, what),
              0);
    Tensor h = tanh(matmul(in[0], in[1]));
    Tensor eager = (matmul(nn::functional::softmax(exp(h), -1), in[2]) * h.sum({0})).sum({1});
    expect_close(fast, eager, 1e-5, 1e-6, what);
    // Fewer: the arena and the result, against one allocation per intermediate.
    EXPECT_LT(arena, per_value) << what;
  }
  const std::string note = planned.launch_summary();
  std::smatch plan;
  ASSERT_TRUE(std::regex_search(
      note, plan, std::regex(R"(intermediates in one device arena: (\d+) buffers, .* for (\d+) intermediates)")))
      << note;
  EXPECT_LT(std::stoi(plan[1]), std::stoi(plan[2])) << note;  // values share buffers
  // The last elementwise group writes its product over the second matmul's, which it reads
  // for the last time.
  EXPECT_NE(note.find(", 1 in place"), std::string::npos) << note;
  EXPECT_EQ(op_by_op.launch_summary().find("arena"), std::string::npos) << op_by_op.launch_summary();
}

TEST(CudaCompiled, CallsThatNeedGradientsRunOnTheReferenceExecutorAndTrain) {
  REQUIRE_COMPILED_GPU();
  manual_seed(5);
  auto model = std::make_shared<Block>();
  model->to(kCUDA);
  auto twin = std::make_shared<Block>();
  twin->load_state_dict(model->state_dict());
  twin->to(kCUDA);
  auto compiled = compile(model, {.backend = gpu_backend()});
  Tensor x = randn({4, 24}).to(kCUDA);
  compiled(x).sum().backward();
  (*twin)(x).sum().backward();
  std::string note = backend_note(explain(compiled));
  EXPECT_NE(note.find("interp, because gradients are needed"), std::string::npos) << note;
  expect_close(model->fc1->weight.grad(), twin->fc1->weight.grad(), 1e-5, 1e-6, "fc1 grad");
}

// The seed models and layers, small: compiled on the GPU against eager on the GPU and on the
// CPU, in eval mode, and in training mode without gradients (dropout draws the same streams,
// BatchNorm's running statistics are written back alike).
struct SeedCase {
  const char* name;
  std::function<std::shared_ptr<nn::Module>()> make;
  Shape input;
};

std::vector<SeedCase> seed_cases() {
  using namespace nn;
  return {
      {"ResidualMLP", [] { return models::build(models::MLPConfig{12, 16, 2, 5}); }, {3, 12}},
      {"FashionMLP", [] { return models::build(models::FashionMLPConfig{12, 16, 5, 0.3}); },
       {4, 12}},
      {"BatchNormCNN",
       [] { return models::build(models::BatchNormCNNConfig{1, 8, 4, 6, 16, 5, 0.25}); },
       {3, 1, 8, 8}},
      {"ConvStack",
       [] {
         return std::make_shared<Sequential>(
             std::make_shared<Conv2d>(3, 8, 3, Conv2dOptions{.padding = 1}),
             std::make_shared<BatchNorm2d>(8), std::make_shared<ReLU>(),
             std::make_shared<AvgPool2d>(2),
             std::make_shared<Conv2d>(8, 12, 3, Conv2dOptions{.stride = 2, .padding = 1, .groups = 2}),
             std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
             std::make_shared<Linear>(12 * 3 * 3, 4));
       },
       {2, 3, 24, 24}},
      {"TransformerClassifier",
       [] {
         return models::build(models::TransformerClassifierConfig{.image_size = 6,
                                                                  .d_model = 8,
                                                                  .nhead = 2,
                                                                  .num_layers = 2,
                                                                  .dim_feedforward = 16,
                                                                  .dropout = 0.1,
                                                                  .num_classes = 4});
       },
       {2, 1, 6, 6}},
  };
}

TEST(CudaCompiled, SeedModelsMatchEagerInEvalAndTrainingMode) {
  REQUIRE_COMPILED_GPU();
  for (const SeedCase& c : seed_cases()) {
    manual_seed(7);
    std::shared_ptr<nn::Module> model = c.make();
    std::shared_ptr<nn::Module> twin = c.make();
    twin->load_state_dict(model->state_dict());
    Tensor x = randn(c.input);
    model->eval();
    Tensor on_cpu;
    {
      NoGradGuard no_grad;
      on_cpu = (*model)(x);
    }
    model->to(kCUDA);
    twin->to(kCUDA);
    Tensor xg = x.to(kCUDA);
    NoGradGuard no_grad;
    auto compiled = compile(model, {.backend = gpu_backend()});
    Tensor eager = (*model)(xg);
    Tensor fast = compiled(xg);
    expect_close(fast, eager, 1e-5, 1e-5, std::string(c.name) + " eval, vs the GPU");
    expect_close(fast.to(kCPU), on_cpu, 1e-4, 1e-5, std::string(c.name) + " eval, vs the CPU");
    std::string note = backend_note(explain(compiled));
    EXPECT_EQ(note.rfind(gpu_backend() + ": ", 0), 0u) << c.name << ": " << note;

    // Training mode: the same random positions for both, the same buffer updates.
    model->train();
    twin->train();
    for (int call = 0; call < 2; ++call) {
      manual_seed(110 + call);
      Tensor eager_train = (*twin)(xg);
      uint64_t eager_offset = default_generator().offset();
      manual_seed(110 + call);
      Tensor fast_train = compiled(xg);
      expect_close(fast_train, eager_train, 1e-5, 1e-5, std::string(c.name) + " training");
      EXPECT_EQ(default_generator().offset(), eager_offset) << c.name;
    }
    auto bm = model->named_buffers(), bt = twin->named_buffers();
    for (size_t i = 0; i < bm.size() && i < bt.size(); ++i)
      expect_close(bm[i].second, bt[i].second, 1e-5, 1e-6,
                   std::string(c.name) + " buffer " + bm[i].first);
  }
}

TEST(CudaCompiled, AllCpuModelsStayOnTheCpuBackend) {
  REQUIRE_COMPILED_GPU();
  auto model = std::make_shared<Block>();
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = gpu_backend()});
  compiled(randn({2, 24}));
  std::string note = backend_note(explain(compiled));
  EXPECT_NE(note.find("cannot run this graph: %0 is float32[2, 24], and it runs only GPU tensors"),
            std::string::npos)
      << note;
}

}  // namespace
}  // namespace kiln
