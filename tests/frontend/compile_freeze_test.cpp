// CompileOptions::freeze: parameters folded into the compiled graph, the version guard that
// recompiles (and says why) when a frozen parameter changes in place, and where freeze does
// not apply (calls that need gradients).
#include <gtest/gtest.h>

#include "frontend/compare_bits.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

// y = x @ (2 w)^T + b: the scaled, transposed weight depends only on parameters.
struct ScaledLinear : nn::Module {
  Tensor w = register_parameter("w", randn({8, 6}));
  Tensor b = register_parameter("b", randn({8}));
  Tensor forward(const Tensor& x) override { return matmul(x, (w * 2.0).t()) + b; }
};

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(CompileFreeze, FoldsWhatDependsOnlyOnParameters) {
  manual_seed(1);
  auto model = std::make_shared<ScaledLinear>();
  NoGradGuard no_grad;
  Tensor x = randn({4, 6});
  Tensor want = nn::call(*model, x);
  auto live = compile(model);
  auto frozen = compile(model, {.freeze = true});
  EXPECT_TRUE(close_to(live(x), want));
  EXPECT_TRUE(close_to(frozen(x), want));

  ExplainReport live_report = explain(live), frozen_report = explain(frozen);
  const ExplainEntry& l = live_report.entries.at(0);
  const ExplainEntry& f = frozen_report.entries.at(0);
  // Without freeze the weight is scaled (and transposed) on every call; frozen, once.
  EXPECT_TRUE(mentions(l.optimized_graph_text, "= mul(")) << l.optimized_graph_text;
  EXPECT_FALSE(mentions(f.optimized_graph_text, "= mul(")) << f.optimized_graph_text;
  EXPECT_FALSE(mentions(l.backend, "frozen")) << l.backend;
  EXPECT_TRUE(mentions(f.backend, "2 frozen parameters")) << f.backend;
}

TEST(CompileFreeze, AChangeInPlaceRecompilesAndSaysWhich) {
  manual_seed(2);
  auto model = std::make_shared<ScaledLinear>();
  NoGradGuard no_grad;
  Tensor x = randn({4, 6});
  auto frozen = compile(model, {.freeze = true});
  auto live = compile(model);
  frozen(x);
  live(x);
  model->w.mul_(0.5);  // what an optimizer step does
  Tensor want = nn::call(*model, x);
  EXPECT_TRUE(close_to(frozen(x), want)) << "a stale frozen weight";
  EXPECT_TRUE(close_to(live(x), want));

  ExplainReport f = explain(frozen);
  ASSERT_EQ(f.recompile_reasons.size(), 1u);
  EXPECT_TRUE(mentions(f.recompile_reasons[0],
                       "parameter w changed in place since it was frozen (version "))
      << f.recompile_reasons[0];
  EXPECT_TRUE(mentions(f.recompile_reasons[0], "compile without freeze"));
  EXPECT_EQ(f.entries.size(), 1u) << "the stale graph can never match again: dropped";
  EXPECT_TRUE(explain(live).recompile_reasons.empty()) << "parameters are read per call";

  // Many changes never reach the cache limit: each stale graph is dropped.
  for (int step = 0; step < 12; ++step) {
    model->b.add_(0.25);
    EXPECT_TRUE(close_to(frozen(x), nn::call(*model, x))) << "step " << step;
  }
  EXPECT_EQ(explain(frozen).eager_calls, 0u);
  EXPECT_EQ(explain(frozen).entries.size(), 1u);
}

TEST(CompileFreeze, CallsThatNeedGradientsReadParametersLive) {
  manual_seed(3);
  auto model = std::make_shared<ScaledLinear>();
  Tensor x = randn({4, 6});
  auto frozen = compile(model, {.freeze = true});
  Tensor y = frozen(x);  // grad mode on, parameters require grad: interp, nothing frozen
  EXPECT_TRUE(close_to(y, nn::call(*model, x)));
  y.sum().backward();
  EXPECT_TRUE(model->w.grad().defined());
  {
    NoGradGuard no_grad;
    model->w.mul_(0.5);
  }
  EXPECT_TRUE(close_to(frozen(x), nn::call(*model, x)));
  ExplainReport r = explain(frozen);
  EXPECT_TRUE(r.recompile_reasons.empty());
  EXPECT_TRUE(mentions(r.entries.at(0).backend, "interp, because gradients are needed"));
}

}  // namespace
}  // namespace kiln
