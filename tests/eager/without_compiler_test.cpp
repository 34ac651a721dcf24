// kiln built without its code generator (-DKILN_COMPILER=OFF): tracing, compile() on the
// reference backend, graph breaks and explain all work; the cpu backend is absent, and asking
// for it by name says why and what to do. Built into kiln_eager_tests only.
#include <gtest/gtest.h>

#include "kiln/backends/backend.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

struct Mlp : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

// Halves x while its norm is large: a host read of a traced value (a graph break).
struct Halving : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor h = fc(x);
    while (h.abs().sum().item<double>() > 4.0) h = h * 0.5;
    return h;
  }
};

bool same(const Tensor& a, const Tensor& b) {
  return Shape(a.sizes()) == Shape(b.sizes()) && a.to_vector<double>() == b.to_vector<double>();
}

TEST(WithoutCompiler, OnlyTheReferenceBackendIsRegistered) {
  init();
  EXPECT_EQ(backends::backend_names(), std::vector<std::string>{"interp"});
  EXPECT_EQ(&backends::default_backend(), &backends::reference_backend());
}

TEST(WithoutCompiler, CompileRunsOnInterpAndMatchesEagerBitwise) {
  auto model = std::make_shared<Mlp>();
  model->eval();
  auto compiled = compile(model);
  NoGradGuard no_grad;
  for (int64_t batch : {2, 5}) {
    Tensor x = randn({batch, 6});
    EXPECT_TRUE(same(compiled(x), (*model)(x))) << batch;
  }
  ExplainReport r = explain(compiled);
  EXPECT_EQ(r.backend, "interp");
  EXPECT_GE(r.graph_count(), 1u);
  EXPECT_NE(r.str().find("compiled Mlp (backend interp)"), std::string::npos) << r.str();
}

TEST(WithoutCompiler, AskingForTheCpuBackendSaysTheBuildHasNone) {
  auto model = std::make_shared<Mlp>();
  expect_error([&] { compile(model, {.backend = "cpu"}); },
               {"unknown backend \"cpu\"", "registered: \"interp\"",
                "link kiln::kiln (not kiln::eager alone) from a build with KILN_COMPILER=ON",
                "Fix:"});
}

TEST(WithoutCompiler, TracingAndGraphBreaksWork) {
  auto model = std::make_shared<Mlp>();
  std::unique_ptr<ir::Graph> g = trace(*model, randn({2, 6}));
  EXPECT_EQ(g->inputs().at(1).name, "fc1.weight");

  auto halving = std::make_shared<Halving>();
  auto strict = compile(halving, {.fullgraph = true});
  expect_error([&] { strict(randn({2, 4})); }, {"graph break in Halving", "kiln::while_loop"});
  auto segmented = compile(halving);
  for (double scale : {10.0, 1000.0}) {
    Tensor x = randn({2, 4}) * scale;
    EXPECT_TRUE(same(segmented(x), (*halving)(x))) << scale;
  }
  EXPECT_EQ(explain(segmented).graph_break_count(), 1u);
}

}  // namespace
}  // namespace kiln
