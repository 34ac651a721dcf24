// dce: unused nodes go, transitively and inside regions; random and side-effect ops, graph
// inputs and region signatures stay.
#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

using testing::expect_same_results;
using testing::run_passes;

TEST(PassDce, RemovesUnusedChainsTransitively) {
  EXPECT_EQ(run_passes("dce",
                       "graph g {\n"
                       "  input %0 \"x\": float32[4]\n"
                       "  %1: float32[4] = relu(%0) {}\n"
                       "  %2: float32[4] = exp(%1) {}\n"
                       "  %3: float32[4] = neg(%0) {}\n"
                       "  %4: float32[4] = add(%2, %3) {}\n"
                       "  return %3\n"
                       "}\n"),
            "graph g {\n"
            "  input %0 \"x\": float32[4]\n"
            "  %3: float32[4] = neg(%0) {}\n"
            "  return %3\n"
            "}\n");
}

TEST(PassDce, KeepsUnusedInputsAndAGraphWithNothingDead) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  param %1 \"w\": float32[4]\n"
      "  const %2 \"c\": float32[2] = [1, 2]\n"
      "  %3: float32[4] = relu(%0) {}\n"
      "  return %3\n"
      "}\n";
  EXPECT_EQ(run_passes("dce", ir), ir);
}

TEST(PassDce, KeepsRandomAndSideEffectOpsAndWhatTheyRead) {
  // An unused dropout still draws from the generator: removing it would shift every later
  // draw against eager. debug_print prints on every run.
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  %1: float32[4] = relu(%0) {}\n"
      "  %2, %3: float32[4], bool[4] = dropout(%1) {p=0.5, seed=1, offset=0, generator=default}\n"
      "  %4: float32[4] = exp(%0) {}\n"
      "  %5: float32[4] = debug_print(%4) {label=\"e\"}\n"
      "  %6: float32[4] = rand() {shape=[4], dtype=float32, device=cpu, generator=default}\n"
      "  return %0\n"
      "}\n";
  EXPECT_EQ(run_passes("dce", ir), ir);
}

TEST(PassDce, KeepsMultiOutputNodesWithOneUsedResult) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[2, 3]\n"
      "  %1, %2: float32[2], int64[2] = max_dim(%0) {dim=1, keepdim=false}\n"
      "  return %2\n"
      "}\n";
  EXPECT_EQ(run_passes("dce", ir), ir);
}

const char* kCond =
    "graph g {\n"
    "  input %0 \"p\": bool[]\n"
    "  input %1 \"x\": float32[2]\n"
    "  %2: float32[2] = cond(%0, %1) {} {\n"
    "    region (%3: float32[2]) {\n"
    "      %4: float32[2] = relu(%3) {}\n"
    "      %5: float32[2] = exp(%3) {}\n"
    "      yield %4\n"
    "    }\n"
    "    region (%6: float32[2]) {\n"
    "      %7: float32[2] = neg(%6) {}\n"
    "      yield %6\n"
    "    }\n"
    "  }\n"
    "  return %2\n"
    "}\n";

TEST(PassDce, CleansRegionsButKeepsTheirInputsAndYields) {
  EXPECT_EQ(run_passes("dce", kCond),
            "graph g {\n"
            "  input %0 \"p\": bool[]\n"
            "  input %1 \"x\": float32[2]\n"
            "  %2: float32[2] = cond(%0, %1) {} {\n"
            "    region (%3: float32[2]) {\n"
            "      %4: float32[2] = relu(%3) {}\n"
            "      yield %4\n"
            "    }\n"
            "    region (%6: float32[2]) {\n"
            "      yield %6\n"
            "    }\n"
            "  }\n"
            "  return %2\n"
            "}\n");
  expect_same_results("dce", kCond);
}

TEST(PassDce, RemovesAnUnusedControlFlowNodeUnlessItsRegionHasAnEffect) {
  const char* pure =
      "graph g {\n"
      "  input %0 \"p\": bool[]\n"
      "  input %1 \"x\": float32[2]\n"
      "  %2: float32[2] = cond(%0, %1) {} {\n"
      "    region (%3: float32[2]) {\n"
      "      %4: float32[2] = relu(%3) {}\n"
      "      yield %4\n"
      "    }\n"
      "    region (%5: float32[2]) {\n"
      "      yield %5\n"
      "    }\n"
      "  }\n"
      "  return %1\n"
      "}\n";
  EXPECT_EQ(run_passes("dce", pure),
            "graph g {\n"
            "  input %0 \"p\": bool[]\n"
            "  input %1 \"x\": float32[2]\n"
            "  return %1\n"
            "}\n");
  const char* printing =
      "graph g {\n"
      "  input %0 \"p\": bool[]\n"
      "  input %1 \"x\": float32[2]\n"
      "  %2: float32[2] = cond(%0, %1) {} {\n"
      "    region (%3: float32[2]) {\n"
      "      %4: float32[2] = debug_print(%3) {label=\"then\"}\n"
      "      yield %3\n"
      "    }\n"
      "    region (%5: float32[2]) {\n"
      "      yield %5\n"
      "    }\n"
      "  }\n"
      "  return %1\n"
      "}\n";
  EXPECT_EQ(run_passes("dce", printing), printing);
}

TEST(PassDce, ReportsWhatItRemoved) {
  std::unique_ptr<ir::Graph> g = testing::parse(kCond);
  PassReport report = PassManager("dce").run(*g);
  ASSERT_EQ(report.passes.size(), 1u);
  EXPECT_TRUE(report.passes[0].changed);
  EXPECT_EQ(report.passes[0].summary, "removed 2 nodes");
  report = PassManager("dce").run(*g);
  EXPECT_FALSE(report.passes[0].changed);
  EXPECT_EQ(report.passes[0].summary, "removed 0 nodes");
}

}  // namespace
}  // namespace kiln::passes
