// The fuse pass: which elementwise ops end up in which fusion group (IR text in, checked IR
// text out), the limits, the cycle rule, and that fused graphs compute what the unfused
// ones did (both run through the reference executor, which runs a group op by op).
#include <gtest/gtest.h>

#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/kiln.h"
#include "kiln/ops/fused.h"
#include "kiln/passes/pass_manager.h"
#include "passes/pass_test_util.h"
#include "test_util.h"

namespace kiln::passes {
namespace {

using testing::run_passes;

// The number of `fused` nodes at the top level and the ops inside each.
std::vector<size_t> group_sizes(const ir::Graph& g) {
  std::vector<size_t> sizes;
  for (const auto& node : g.nodes())
    if (node->op == &ops::fused) sizes.push_back(node->regions.at(0)->nodes().size());
  return sizes;
}

std::unique_ptr<ir::Graph> fuse(std::string_view text, std::string_view pipeline = "fuse") {
  std::unique_ptr<ir::Graph> g = ir::parse_graph(text);
  PassManager(pipeline, testing::test_pipeline_options()).run(*g);
  return g;
}

TEST(PassFuse, ChainBecomesOneGroup) {
  EXPECT_EQ(run_passes("fuse", R"(graph g {
  input %0 "x": float32[4, 8]
  input %1 "a": float32[8]
  input %2 "b": float32[4, 1]
  %3: float32[4, 8] = mul(%0, %1) {}
  %4: float32[4, 8] = add(%3, %2) {}
  %5: float32[4, 8] = relu(%4) {}
  return %5 "out"
})"),
            R"(graph g {
  input %0 "x": float32[4, 8]
  input %1 "a": float32[8]
  input %2 "b": float32[4, 1]
  %6: float32[4, 8] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%7: float32[4, 8], %8: float32[8], %9: float32[4, 1]) {
      %10: float32[4, 8] = mul(%7, %8) {}
      %11: float32[4, 8] = add(%10, %9) {}
      %12: float32[4, 8] = relu(%11) {}
      yield %12
    }
  }
  return %6 "out"
}
)");
}

TEST(PassFuse, ContractionsSplitGroupsAndIntermediatesUsedOutsideAreResults) {
  // t feeds both the group and the matmul, so the first group returns it; the matmul is
  // not elementwise and stays a node between the two groups.
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float32[4, 4]
  input %1 "w": float32[4, 4]
  %2: float32[4, 4] = exp(%0) {}
  %3: float32[4, 4] = neg(%2) {}
  %4: float32[4, 4] = matmul(%2, %1) {}
  %5: float32[4, 4] = tanh(%4) {}
  %6: float32[4, 4] = add(%5, %3) {}
  return %6
})");
  ASSERT_EQ(g->nodes().size(), 3u) << ir::print_graph(*g);
  EXPECT_EQ(group_sizes(*g), (std::vector<size_t>{2, 2})) << ir::print_graph(*g);
  EXPECT_EQ(g->nodes()[0]->outputs.size(), 2u) << "exp's result is read by the matmul too";
  EXPECT_EQ(g->nodes()[1]->op->name, "matmul");
}

TEST(PassFuse, DifferentShapesMakeDifferentGroups) {
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float32[4, 1]
  input %1 "y": float32[4, 8]
  %2: float32[4, 1] = sigmoid(%0) {}
  %3: float32[4, 1] = mul(%2, %0) {}
  %4: float32[4, 8] = add(%3, %1) {}
  %5: float32[4, 8] = relu(%4) {}
  return %5
})");
  EXPECT_EQ(group_sizes(*g), (std::vector<size_t>{2, 2})) << ir::print_graph(*g);
}

TEST(PassFuse, DiamondsMergeThroughTheirConsumer) {
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float32[16]
  %1: float32[16] = exp(%0) {}
  %2: float32[16] = sin(%0) {}
  %3: float32[16] = mul(%1, %2) {}
  return %3
})");
  EXPECT_EQ(group_sizes(*g), std::vector<size_t>{3}) << ir::print_graph(*g);
}

TEST(PassFuse, RefusesAMergeThatWouldMakeACycle) {
  // b reads a directly and through the reduction: a group {a, b} would need the sum,
  // which needs the group. (A sum over the first dim: one over the last would join them in
  // a row group.)
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float32[4, 8]
  %1: float32[4, 8] = exp(%0) {}
  %2: float32[1, 8] = sum(%1) {dims=[0], keepdim=true}
  %3: float32[4, 8] = div(%1, %2) {}
  return %3
})");
  EXPECT_EQ(group_sizes(*g), (std::vector<size_t>{1, 1})) << ir::print_graph(*g);
  EXPECT_EQ(g->nodes()[1]->op->name, "sum");
}

TEST(PassFuse, LimitsSplitLongChains) {
  const char* chain = R"(graph g {
  input %0 "x": float32[8]
  %1: float32[8] = exp(%0) {}
  %2: float32[8] = neg(%1) {}
  %3: float32[8] = tanh(%2) {}
  %4: float32[8] = add(%3, %0) {}
  return %4
})";
  EXPECT_EQ(group_sizes(*fuse(chain, "fuse{max-ops=2}")), (std::vector<size_t>{2, 2}));
  EXPECT_EQ(group_sizes(*fuse(chain, "fuse{max-ops=64}")), std::vector<size_t>{4});
  // add's second operand (x) is already an input of the group: one input in all.
  EXPECT_EQ(group_sizes(*fuse(chain, "fuse{max-inputs=1}")), std::vector<size_t>{4});
  std::unique_ptr<ir::Graph> two = fuse(R"(graph g {
  input %0 "x": float32[8]
  input %1 "y": float32[8]
  input %2 "z": float32[8]
  %3: float32[8] = add(%0, %1) {}
  %4: float32[8] = mul(%3, %2) {}
  return %4
})",
                                        "fuse{max-inputs=2}");
  EXPECT_EQ(group_sizes(*two), (std::vector<size_t>{1, 1}));
}

TEST(PassFuse, LeavesUnsupportedDtypesAndRandomOpsAlone) {
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float32[8]
  %1: float16[8] = cast(%0) {dtype=float16}
  %2, %3: float32[8], bool[8] = dropout(%0) {p=0.5, seed=1, offset=0}
  return %1, %2
})");
  EXPECT_TRUE(group_sizes(*g).empty()) << ir::print_graph(*g);
}

TEST(PassFuse, FusesInsideRegions) {
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "p": bool[]
  input %1 "x": float32[8]
  %2: float32[8] = cond(%0, %1) {} {
    region (%3: float32[8]) {
      %4: float32[8] = exp(%3) {}
      %5: float32[8] = neg(%4) {}
      yield %5
    }
    region (%6: float32[8]) {
      yield %6
    }
  }
  return %2
})");
  const ir::Graph& then_region = *g->nodes().at(0)->regions.at(0);
  EXPECT_EQ(group_sizes(then_region), std::vector<size_t>{2}) << ir::print_graph(*g);
}

TEST(PassFuse, RunsOnceOnAFusedGraph) {
  const char* text = R"(graph g {
  input %0 "x": float32[8]
  %1: float32[8] = exp(%0) {}
  %2: float32[8] = neg(%1) {}
  return %2
})";
  EXPECT_EQ(group_sizes(*fuse(text, "fuse,fuse")), std::vector<size_t>{2});
  EXPECT_EQ(run_passes("fuse,fuse", text), run_passes("fuse", text));
}

TEST(PassFuse, RejectsBadLimits) {
  expect_error([] { PassManager("fuse{max-ops=0}"); }, {"[fuse]", "max-ops=0", "Fix:"});
  expect_error([] { PassManager("fuse{max-kernels=3}"); }, {"max-kernels"});
}

// ---- row groups: reductions over the last dim with the ops around them ----

TEST(PassFuse, SoftmaxWithItsProducersBecomesOneRowGroup) {
  // Attention's softmax(scores * scale + mask) as decompose writes it: one kernel.
  EXPECT_EQ(run_passes("fuse", R"(graph g {
  input %0 "scores": float32[s0, 16]
  input %1 "mask": float32[16]
  input %2 "scale": float32[]
  %3: float32[s0, 16] = mul(%0, %2) {}
  %4: float32[s0, 16] = add(%3, %1) {}
  %5: float32[s0, 1] = amax(%4) {dims=[1], keepdim=true}
  %6: float32[s0, 16] = sub(%4, %5) {}
  %7: float32[s0, 16] = exp(%6) {}
  %8: float32[s0, 1] = sum(%7) {dims=[-1], keepdim=true}
  %9: float32[s0, 16] = div(%7, %8) {}
  return %9
})"),
            R"(graph g {
  input %0 "scores": float32[s0, 16]
  input %1 "mask": float32[16]
  input %2 "scale": float32[]
  %10: float32[s0, 16] = fused(%0, %2, %1) {kind="row"} {
    region (%11: float32[s0, 16], %12: float32[], %13: float32[16]) {
      %14: float32[s0, 16] = mul(%11, %12) {}
      %15: float32[s0, 16] = add(%14, %13) {}
      %16: float32[s0, 1] = amax(%15) {dims=[1], keepdim=true}
      %17: float32[s0, 16] = sub(%15, %16) {}
      %18: float32[s0, 16] = exp(%17) {}
      %19: float32[s0, 1] = sum(%18) {dims=[-1], keepdim=true}
      %20: float32[s0, 16] = div(%18, %19) {}
      yield %20
    }
  }
  return %10
}
)");
}

TEST(PassFuse, PerRowValuesJoinTheRowGroupAndCanBeResults) {
  // layer_norm's statistics: mean and 1/sqrt(var + eps) are [4, 1] ops between the two sums,
  // and returned too.
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float64[4, 8]
  input %1 "n": float64[]
  input %2 "eps": float64[]
  %3: float64[4, 1] = sum(%0) {dims=[1], keepdim=true}
  %4: float64[4, 1] = div(%3, %1) {}
  %5: float64[4, 8] = sub(%0, %4) {}
  %6: float64[4, 8] = mul(%5, %5) {}
  %7: float64[4, 1] = sum(%6) {dims=[1], keepdim=true}
  %8: float64[4, 1] = div(%7, %1) {}
  %9: float64[4, 1] = add(%8, %2) {}
  %10: float64[4, 1] = rsqrt(%9) {}
  %11: float64[4, 8] = mul(%5, %10) {}
  return %11, %4, %10
})");
  ASSERT_EQ(g->nodes().size(), 1u) << ir::print_graph(*g);
  const ir::Node& group = *g->nodes()[0];
  EXPECT_EQ(static_cast<const ops::FusedAttrs&>(*group.attrs).kind, "row");
  EXPECT_EQ(group.regions[0]->nodes().size(), 9u);
  EXPECT_EQ(group.outputs.size(), 3u);
}

TEST(PassFuse, OnlyFloatReductionsOverTheLastDimWithKeepdimMakeRowGroups) {
  // Over another dim, several dims, without keepdim, or of integers (sum -> int64): the
  // reductions stay nodes and split the elementwise ops into groups of one shape each.
  for (const char* reduction : {"%3: float32[1, 8] = sum(%2) {dims=[0], keepdim=true}",
                                "%3: float32[1, 1] = sum(%2) {dims=[0, 1], keepdim=true}",
                                "%3: float32[4] = amax(%2) {dims=[1], keepdim=false}"}) {
    std::unique_ptr<ir::Graph> g = fuse(std::string(R"(graph g {
  input %0 "x": float32[4, 8]
  input %1 "b": float32[8]
  %2: float32[4, 8] = add(%0, %1) {}
  )") + reduction + R"(
  return %3
})");
    ASSERT_EQ(g->nodes().size(), 2u) << ir::print_graph(*g);
    EXPECT_EQ(g->nodes()[1]->op->lowering, LoweringClass::Reduction) << ir::print_graph(*g);
  }
  std::unique_ptr<ir::Graph> ints = fuse(R"(graph g {
  input %0 "x": int32[4, 8]
  %1: int32[4, 8] = abs(%0) {}
  %2: int64[4, 1] = sum(%1) {dims=[1], keepdim=true}
  return %2
})");
  ASSERT_EQ(ints->nodes().size(), 2u) << ir::print_graph(*ints);
  EXPECT_EQ(ints->nodes()[1]->op->name, "sum");
}

TEST(PassFuse, RowGroupsOfDifferentRowLengthsStaySeparate) {
  // Both reduce rows of 4 values, but of [4, 8] and [4, 16]: one kernel cannot loop over both.
  std::unique_ptr<ir::Graph> g = fuse(R"(graph g {
  input %0 "x": float32[4, 8]
  input %1 "y": float32[4, 16]
  %2: float32[4, 1] = sum(%0) {dims=[1], keepdim=true}
  %3: float32[4, 16] = mul(%1, %2) {}
  %4: float32[4, 1] = amax(%3) {dims=[1], keepdim=true}
  return %4
})");
  EXPECT_EQ(group_sizes(*g), (std::vector<size_t>{1, 2})) << ir::print_graph(*g);

  // A reduction of per-row values ([4, 1], as layer_norm of a mean would make) is not a
  // per-row op of the [4, 3] group: inside it, it would loop over 3 columns (a random
  // program found this).
  std::unique_ptr<ir::Graph> stats = fuse(R"(graph g {
  input %0 "x": float32[4, 3]
  %1: float32[4, 1] = sum(%0) {dims=[1], keepdim=true}
  %2: float32[4, 1] = exp(%1) {}
  %3: float32[4, 1] = sum(%2) {dims=[1], keepdim=true}
  %4: float32[4, 1] = sub(%2, %3) {}
  return %4
})");
  EXPECT_EQ(group_sizes(*stats), (std::vector<size_t>{2, 2})) << ir::print_graph(*stats);
}

// Fused graphs mean what the unfused ones did: the reference executor runs both.
TEST(PassFuse, FusedGraphComputesTheSame) {
  const char* text = R"(graph g {
  input %0 "x": float32[3, 5]
  input %1 "b": float32[5]
  %2: float32[3, 5] = add(%0, %1) {}
  %3: float32[3, 5] = tanh(%2) {}
  %4: float32[3, 1] = sum(%3) {dims=[1], keepdim=true}
  %5: float32[3, 5] = sub(%3, %4) {}
  %6: bool[3, 5] = gt(%5, %0) {}
  %7: float32[3, 5] = where(%6, %5, %0) {}
  return %7, %4
})";
  std::shared_ptr<const ir::Graph> plain = ir::parse_graph(text);
  std::shared_ptr<const ir::Graph> fused = fuse(text);
  // The sum over the last dim makes everything one row group: the per-row sum and the ops of
  // the row's shape around it.
  EXPECT_EQ(group_sizes(*fused), (std::vector<size_t>{6})) << ir::print_graph(*fused);
  Generator gen(7);
  std::vector<Tensor> inputs{randn({3, 5}, {}, &gen), randn({5}, {}, &gen)};
  std::vector<Tensor> want = interp::Executable(plain).run(inputs);
  std::vector<Tensor> got = interp::Executable(fused).run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << "output " << i;
}

}  // namespace
}  // namespace kiln::passes
