// cse: equal computations merge (chains collapse in one run, regions separately); random
// ops, side-effect ops, different attributes and different operands never merge.
#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

using testing::expect_same_results;
using testing::run_passes;

TEST(PassCse, MergesEqualNodesAndCollapsesChains) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  %1: float32[4] = relu(%0) {}\n"
      "  %2: float32[4] = relu(%0) {}\n"
      "  %3: float32[4] = exp(%1) {}\n"
      "  %4: float32[4] = exp(%2) {}\n"
      "  %5: float32[4] = add(%3, %4) {}\n"
      "  return %5, %4\n"
      "}\n";
  EXPECT_EQ(run_passes("cse", ir),
            "graph g {\n"
            "  input %0 \"x\": float32[4]\n"
            "  %1: float32[4] = relu(%0) {}\n"
            "  %3: float32[4] = exp(%1) {}\n"
            "  %5: float32[4] = add(%3, %3) {}\n"
            "  return %5, %3\n"
            "}\n");
  expect_same_results("cse", ir);
}

TEST(PassCse, MergesEqualAttributesAndMultiOutputNodes) {
  EXPECT_EQ(run_passes("cse",
                       "graph g {\n"
                       "  input %0 \"x\": float32[2, 3]\n"
                       "  %1, %2: float32[2], int64[2] = max_dim(%0) {dim=1, keepdim=false}\n"
                       "  %3, %4: float32[2], int64[2] = max_dim(%0) {dim=1, keepdim=false}\n"
                       "  %5: float32[2] = sum(%0) {dims=[1], keepdim=false}\n"
                       "  %6: float32[2] = sum(%0) {dims=[1], keepdim=false}\n"
                       "  return %3, %4, %6, %1\n"
                       "}\n"),
            "graph g {\n"
            "  input %0 \"x\": float32[2, 3]\n"
            "  %1, %2: float32[2], int64[2] = max_dim(%0) {dim=1, keepdim=false}\n"
            "  %5: float32[2] = sum(%0) {dims=[1], keepdim=false}\n"
            "  return %1, %2, %5, %1\n"
            "}\n");
}

TEST(PassCse, KeepsNodesWithDifferentAttributesOrOperands) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  input %1 \"y\": float32[4]\n"
      "  %2: float32[4] = leaky_relu(%0) {negative_slope=0.1}\n"
      "  %3: float32[4] = leaky_relu(%0) {negative_slope=0.2}\n"
      "  %4: float32[4] = sub(%0, %1) {}\n"
      "  %5: float32[4] = sub(%1, %0) {}\n"
      "  %6: float64[4] = cast(%0) {dtype=float64}\n"
      "  %7: float16[4] = cast(%0) {dtype=float16}\n"
      "  %8: float32[4] = relu(%0) {}\n"
      "  %9: float32[4] = relu(%1) {}\n"
      "  return %2, %3, %4, %5, %6, %7, %8, %9\n"
      "}\n";
  EXPECT_EQ(run_passes("cse", ir), ir);
}

TEST(PassCse, NeverMergesRandomOrSideEffectOps) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  %1, %2: float32[4], bool[4] = dropout(%0) {p=0.5, seed=1, offset=0, generator=default}\n"
      "  %3, %4: float32[4], bool[4] = dropout(%0) {p=0.5, seed=1, offset=0, generator=default}\n"
      "  %5: float32[4] = debug_print(%0) {label=\"x\"}\n"
      "  %6: float32[4] = debug_print(%0) {label=\"x\"}\n"
      "  return %1, %3, %5, %6\n"
      "}\n";
  EXPECT_EQ(run_passes("cse", ir), ir);
}

TEST(PassCse, MergesInsideEachRegionOnItsOwn) {
  // The duplicate relus inside the branch merge; the relu outside reads another value and
  // the control-flow node itself is never merged.
  const char* ir =
      "graph g {\n"
      "  input %0 \"p\": bool[]\n"
      "  input %1 \"x\": float32[2]\n"
      "  %2: float32[2] = relu(%1) {}\n"
      "  %3: float32[2] = cond(%0, %1) {} {\n"
      "    region (%4: float32[2]) {\n"
      "      %5: float32[2] = relu(%4) {}\n"
      "      %6: float32[2] = relu(%4) {}\n"
      "      %7: float32[2] = mul(%5, %6) {}\n"
      "      yield %7\n"
      "    }\n"
      "    region (%8: float32[2]) {\n"
      "      yield %8\n"
      "    }\n"
      "  }\n"
      "  %9: float32[2] = cond(%0, %1) {} {\n"
      "    region (%10: float32[2]) {\n"
      "      %11: float32[2] = relu(%10) {}\n"
      "      %12: float32[2] = mul(%11, %11) {}\n"
      "      yield %12\n"
      "    }\n"
      "    region (%13: float32[2]) {\n"
      "      yield %13\n"
      "    }\n"
      "  }\n"
      "  return %2, %3, %9\n"
      "}\n";
  EXPECT_EQ(run_passes("cse", ir),
            "graph g {\n"
            "  input %0 \"p\": bool[]\n"
            "  input %1 \"x\": float32[2]\n"
            "  %2: float32[2] = relu(%1) {}\n"
            "  %3: float32[2] = cond(%0, %1) {} {\n"
            "    region (%4: float32[2]) {\n"
            "      %5: float32[2] = relu(%4) {}\n"
            "      %7: float32[2] = mul(%5, %5) {}\n"
            "      yield %7\n"
            "    }\n"
            "    region (%8: float32[2]) {\n"
            "      yield %8\n"
            "    }\n"
            "  }\n"
            "  %9: float32[2] = cond(%0, %1) {} {\n"
            "    region (%10: float32[2]) {\n"
            "      %11: float32[2] = relu(%10) {}\n"
            "      %12: float32[2] = mul(%11, %11) {}\n"
            "      yield %12\n"
            "    }\n"
            "    region (%13: float32[2]) {\n"
            "      yield %13\n"
            "    }\n"
            "  }\n"
            "  return %2, %3, %9\n"
            "}\n");
  expect_same_results("cse", ir);
}

TEST(PassCse, ReportsHowManyNodesMerged) {
  std::unique_ptr<ir::Graph> g = testing::parse(
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  %1: float32[4] = relu(%0) {}\n"
      "  %2: float32[4] = relu(%0) {}\n"
      "  return %1, %2\n"
      "}\n");
  PassReport report = PassManager("cse").run(*g);
  EXPECT_EQ(report.passes[0].summary, "merged 1 node");
  EXPECT_EQ(report.passes[0].nodes_before, 2u);
  EXPECT_EQ(report.passes[0].nodes_after, 1u);
}

}  // namespace
}  // namespace kiln::passes
