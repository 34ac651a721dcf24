// The backend interface and its registry: names are found or refused with the registered
// ones listed, the rule that picks the backend of a call (gradients, refusals) lives in
// choose_backend, and the fuse pass groups what the backend's FusionRules accept and
// nothing when there are none.
#include <gtest/gtest.h>

#include "frontend/compare_bits.h"
#include "kiln/backends/backend.h"
#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/kiln.h"
#include "kiln/ops/fused.h"
#include "kiln/passes/pass_manager.h"
#include "test_util.h"

namespace kiln::backends {
namespace {

const char* kChain = R"(graph chain {
  input %0 "x": float32[4, 8]
  input %1 "y": float64[4, 8]
  %2: float32[4, 8] = exp(%0) {}
  %3: float32[4, 8] = relu(%2) {}
  %4: float64[4, 8] = neg(%1) {}
  %5: float64[4, 8] = tanh(%4) {}
  return %3, %5
})";

size_t fused_count(const ir::Graph& g) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->op == &ops::fused;
  return n;
}

TEST(BackendRegistry, FindsTheBuiltInBackends) {
  init();
  EXPECT_EQ(backend("cpu").name(), "cpu");
  EXPECT_EQ(backend("interp").name(), "interp");
  EXPECT_EQ(&reference_backend(), &backend("interp"));
  EXPECT_EQ(&default_backend(), &backend("cpu"));
  EXPECT_EQ(find_backend("tpu"), nullptr);
  std::vector<std::string> names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  EXPECT_TRUE(backend("interp").records_gradients());
  EXPECT_FALSE(backend("cpu").records_gradients());
  EXPECT_EQ(backend("interp").fusion_rules(), nullptr);
  ASSERT_NE(backend("cpu").fusion_rules(), nullptr);
}

TEST(BackendRegistry, UnknownNamesListTheRegisteredOnes) {
  init();
  expect_error([] { backend("cdu"); },
               {"unknown backend \"cdu\"", "registered: ", "\"interp\" (the reference executor",
                "\"cpu\" (native code", "Did you mean \"cpu\"?", "Fix:"});
  struct Net : nn::Module {
    Tensor forward(const Tensor& x) { return x.relu(); }
  };
  auto model = std::make_shared<Net>();
  expect_error([&] { compile(model, {.backend = "gpu"}); },
               {"[compile] unknown backend \"gpu\"", "\"cpu\"", "\"interp\""});
}

TEST(BackendRegistry, ANameIsRegisteredOnce) {
  init();
  struct Copy final : Backend {
    std::string_view name() const override { return "interp"; }
    std::string_view summary() const override { return "a second interp"; }
    bool records_gradients() const override { return true; }
    std::optional<std::string> refusal(const ir::Graph&) const override { return {}; }
    const passes::FusionRules* fusion_rules() const override { return nullptr; }
    std::unique_ptr<Executable> compile(std::shared_ptr<const ir::Graph>,
                                        const CompileRequest&) const override {
      return nullptr;
    }
  };
  expect_error([] { register_backend(std::make_unique<Copy>()); },
               {"a backend named \"interp\" is registered already", "Fix:"});
}

TEST(BackendRegistry, ChooseBackendIsTheOneRuleForGradientsAndRefusals) {
  init();
  std::unique_ptr<ir::Graph> g = ir::parse_graph(kChain);
  const Backend& cpu = backend("cpu");
  Choice plain = choose_backend(&cpu, *g, "");
  EXPECT_EQ(plain.backend, &cpu);
  EXPECT_EQ(plain.note, "");
  Choice grad = choose_backend(&cpu, *g, "parameter fc.weight requires grad");
  EXPECT_EQ(grad.backend, &reference_backend());
  EXPECT_NE(grad.note.find("interp, because gradients are needed (parameter fc.weight requires "
                           "grad and grad mode is on)"),
            std::string::npos)
      << grad.note;
  // No backend named: the cpu backend takes a graph of CPU tensors.
  EXPECT_EQ(choose_backend(nullptr, *g, "").backend, &cpu);
  // The reference executor records gradients itself: no fallback, no note.
  EXPECT_EQ(choose_backend(&reference_backend(), *g, "an input requires grad").note, "");

  // A backend that refuses the graph: the reference executor runs it, and the note names
  // the refusal.
  struct Picky final : Backend {
    std::string_view name() const override { return "picky"; }
    std::string_view summary() const override { return "refuses float64"; }
    bool records_gradients() const override { return false; }
    std::optional<std::string> refusal(const ir::Graph&) const override {
      return "it has no float64 kernels";
    }
    const passes::FusionRules* fusion_rules() const override { return nullptr; }
    std::unique_ptr<Executable> compile(std::shared_ptr<const ir::Graph>,
                                        const CompileRequest&) const override {
      return nullptr;
    }
  } picky;
  Choice refused = choose_backend(&picky, *g, "");
  EXPECT_EQ(refused.backend, &reference_backend());
  EXPECT_EQ(refused.note,
            "interp, because the picky backend cannot run this graph: it has no float64 kernels");
}

TEST(BackendRegistry, CompiledExecutablesMatchTheReference) {
  init();
  std::shared_ptr<const ir::Graph> g = ir::parse_graph(kChain);
  Generator gen(5);
  std::vector<Tensor> inputs{randn({4, 8}, {}, &gen), randn({4, 8}, DType::Float64, &gen)};
  std::vector<Tensor> want = reference_backend().compile(g, {})->run(inputs);
  std::unique_ptr<Executable> cpu = backend("cpu").compile(g, {});
  EXPECT_TRUE(cpu->runs_concurrently());
  EXPECT_EQ(fused_count(cpu->optimized_graph()), 2u);
  EXPECT_NE(cpu->summary().find("2 kernels"), std::string::npos) << cpu->summary();
  std::vector<Tensor> got = cpu->run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close_to(got[i], want[i])) << i;
}

// Fuse asks the rules it is given: a target without float64 kernels leaves the float64
// chain unfused, and without rules nothing is fused.
TEST(BackendRegistry, FuseAsksTheBackendsRules) {
  init();
  struct Float32Only final : passes::FusionRules {
    std::string_view target() const override { return "float32-only"; }
    bool can_fuse(const OpDef&, DType dtype, Device device) const override {
      return dtype == DType::Float32 && device.is_cpu();
    }
  } float32_only;
  auto run = [](const passes::FusionRules* rules) {
    std::unique_ptr<ir::Graph> g = ir::parse_graph(kChain);
    passes::PipelineOptions options;
    options.verify_each = true;
    options.context.fusion = rules;
    passes::PassManager("fuse", options).run(*g);
    return g;
  };
  EXPECT_EQ(fused_count(*run(&cpu::compiler::fusion_rules())), 2u);
  std::unique_ptr<ir::Graph> partial = run(&float32_only);
  EXPECT_EQ(fused_count(*partial), 1u) << ir::print_graph(*partial);
  EXPECT_EQ(fused_count(*run(nullptr)), 0u);
}

// A graph that slices a static dim by a symbolic size holds only up to the dim: every
// executor checks the bound before it runs (a call past it would read past the constant).
TEST(BackendRegistry, EveryExecutorChecksTheGraphsSizeBounds) {
  init();
  std::shared_ptr<const ir::Graph> g = ir::parse_graph(R"(graph bounded {
  assume s0 <= 4 slice @embed loc("model.cpp":7 "Net::forward")
  input %0 "x": float32[s0]
  const %1 "pos": float32[4] = [1, 2, 3, 4]
  %2: float32[s0] = slice(%1) {dim=0, start=0, end=s0, step=1}
  %3: float32[s0] = add(%0, %2) {}
  return %3
})");
  for (const Backend* b : {&reference_backend(), &backend("cpu")}) {
    std::unique_ptr<Executable> exe = b->compile(g, {});
    for (int64_t n : {2, 3, 4}) {
      Tensor x = arange(0, n, 1, TensorOptions(DType::Float32)) * 10;
      std::vector<float> want;
      for (int64_t i = 0; i < n; ++i) want.push_back(static_cast<float>(i * 10 + i + 1));
      EXPECT_EQ(exe->run(std::vector<Tensor>{x, Tensor()})[0].to_vector<float>(), want) << b->name() << " n=" << n;
    }
    expect_error([&] { exe->run(std::vector<Tensor>{zeros({5}), Tensor()}); },
                 {"graph bounded: s0 is 5 in this call, but the graph holds only while s0 <= 4 "
                  "(slice at model.cpp:7 (Net::forward) in module 'embed')",
                  "Fix: keep the size within 4"});
  }
}

}  // namespace
}  // namespace kiln::backends
