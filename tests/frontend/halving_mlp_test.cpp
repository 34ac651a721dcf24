// The built-in halving_mlp models: the plain C++ loop on a tensor and its kiln::while_loop
// rewrite agree eagerly; compiled, the loop is a graph break naming its line in
// halving_mlp.cpp, while the while_loop version is one graph equal to eager bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "kiln/kiln.h"
#include "kiln/models.h"
#include "test_util.h"

namespace kiln {
namespace {

bool same(const Tensor& a, const Tensor& b) {
  return Shape(a.sizes()) == Shape(b.sizes()) && a.to_vector<double>() == b.to_vector<double>();
}

std::shared_ptr<nn::Module> built(const std::string& name) {
  manual_seed(0);  // both models get the same weights
  auto model = models::build_model(name);
  model->eval();
  return model;
}

// Inputs large enough that the loop runs several times.
Tensor example(int64_t batch) {
  return randn({batch, 1, 28, 28}) * 10;
}

// The line of `while (abs(X).sum() > 1)` in the model's source, read from the file itself
// (ctest sets KILN_TEST_DATA; a direct run finds the file from the source or build dir).
int loop_line() {
  const std::string rel = "frontend/src/models/halving_mlp.cpp";
  std::vector<std::string> candidates;
  if (const char* data = std::getenv("KILN_TEST_DATA"))
    candidates.push_back(std::string(data) + "/../../" + rel);
  for (const char* up : {"", "../", "../../"}) candidates.push_back(up + rel);
  for (const std::string& path : candidates) {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.find("while (abs(X).sum() > 1)") != std::string::npos) return n;
    }
  }
  ADD_FAILURE() << "cannot read " << rel << ": run from the source or build directory, or "
                << "set KILN_TEST_DATA=<source>/tests/data";
  return -1;
}

TEST(HalvingMLP, EagerLoopAndWhileLoopAgree) {
  auto plain = built("halving_mlp");
  auto rewritten = built("halving_mlp_while");
  EXPECT_EQ(rewritten->type_name(), "HalvingMLPWhile");
  for (double scale : {0.001, 1.0, 100.0}) {
    Tensor x = example(3) * scale;
    Tensor want = (*plain)(x);
    EXPECT_TRUE(same((*rewritten)(x), want)) << scale;
    EXPECT_EQ(Shape(want.sizes()), (Shape{3, 10}));
    EXPECT_LE(abs(want).sum().item<double>(), 1.0);
  }
}

TEST(HalvingMLP, FullgraphNamesTheLoopLineAndTheFix) {
  auto model = built("halving_mlp");
  auto compiled = compile(model, {.fullgraph = true});
  Tensor x = example(2);
  std::string msg;
  try {
    compiled(x);
  } catch (const GraphBreakError& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "expected a GraphBreakError";
  EXPECT_NE(msg.find("frontend/src/models/halving_mlp.cpp:" + std::to_string(loop_line())),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("kiln::while_loop"), std::string::npos) << msg;
}

TEST(HalvingMLP, WhileLoopVersionIsOneGraphEqualToEager) {
  auto model = built("halving_mlp_while");
  auto compiled = compile(model, {.fullgraph = true});
  for (int i = 0; i < 3; ++i) {
    Tensor x = example(2) * (i + 1);
    EXPECT_TRUE(same(compiled(x), (*model)(x))) << i;
  }
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
  EXPECT_NE(ir::print_graph(*trace(*model, example(2))).find("while_loop"), std::string::npos);
}

TEST(HalvingMLP, WithoutFullgraphTheBreakRunsAndMatchesEager) {
  auto model = built("halving_mlp");
  auto compiled = compile(model);
  for (int i = 0; i < 2; ++i) {
    Tensor x = example(2);
    EXPECT_TRUE(same(compiled(x), (*model)(x))) << i;
  }
  EXPECT_EQ(explain(compiled).graph_break_count(), 1u);
}

// Inference on the cpu backend: the while_loop graph runs node by node with its fusion
// groups as kernels, and the plain loop's segments are compiled too.
TEST(HalvingMLP, BothVersionsRunOnTheCpuBackendWithoutGradients) {
  NoGradGuard no_grad;
  for (const char* name : {"halving_mlp", "halving_mlp_while"}) {
    auto model = built(name);
    auto compiled = compile(model, {.backend = "cpu"});
    for (int i = 0; i < 3; ++i) {
      Tensor x = example(2) * (i + 1);
      Tensor want = (*model)(x), got = compiled(x);
      ASSERT_EQ(Shape(got.sizes()), Shape(want.sizes())) << name;
      std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
      for (size_t k = 0; k < g.size(); ++k)
        EXPECT_NEAR(g[k], w[k], 1e-5 + 1e-5 * std::abs(w[k])) << name;
    }
    ExplainReport report = explain(compiled);
    ASSERT_EQ(report.entries.size(), 1u) << report.str();
    if (report.graph_break_count() == 0) {
      EXPECT_NE(report.entries[0].backend.find("node-by-node executor (control flow)"),
                std::string::npos)
          << report.str();
    } else {
      EXPECT_EQ(report.entries[0].native_segments, report.entries[0].segment_misses)
          << report.str();
    }
  }
}

TEST(HalvingMLP, ConfigIsCheckedAndRoundTrips) {
  json::Value cfg = models::resolve_config("halving_mlp_while", json::parse(R"({"d_hidden":8})"));
  EXPECT_EQ(json::dump(cfg), R"({"d_in":784,"d_hidden":8,"d_out":10})");
  expect_error([] { models::build(models::HalvingMLPConfig{.d_hidden = 0}); },
               {"[HalvingMLPConfig] expected d_hidden > 0, found 0", "Fix"});
  expect_error([] { models::build_model("halving_mlp", json::parse(R"({"depth":2})")); },
               {"[halving_mlp config] unknown config key 'depth'"});
}

}  // namespace
}  // namespace kiln
