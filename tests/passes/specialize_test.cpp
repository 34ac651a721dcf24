// The specialize pass: symbolic sizes bound to numbers in every type and size attribute
// (regions included), products of symbols, unbound symbols left alone, the option errors,
// and specialized graphs computing what the dynamic ones did.
#include <gtest/gtest.h>

#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/kiln.h"
#include "kiln/passes/pass_manager.h"
#include "passes/pass_test_util.h"
#include "test_util.h"

namespace kiln::passes {
namespace {

using testing::parse;
using testing::run_passes;

TEST(PassSpecialize, BindsSymbolsInTypesAndSizeAttributes) {
  EXPECT_EQ(run_passes("specialize{s0=8}", R"(graph g {
  input %0 "x": float32[s0, 4, 4]
  %1: float32[s0, 16] = view(%0) {shape=[s0, 16]}
  %2: float32[s0, 16] = relu(%1) {}
  %3: float32[s0*16] = view(%2) {shape=[s0*16]}
  return %3
})"),
            R"(graph g {
  input %0 "x": float32[8, 4, 4]
  %1: float32[8, 16] = view(%0) {shape=[8, 16]}
  %2: float32[8, 16] = relu(%1) {}
  %3: float32[128] = view(%2) {shape=[128]}
  return %3
}
)");
}

TEST(PassSpecialize, LeavesUnboundSymbols) {
  // s1 stays symbolic, also inside a product with s0.
  EXPECT_EQ(run_passes("specialize{s0=3}", R"(graph g {
  input %0 "x": float32[s0, s1]
  %1: float32[s0*s1] = view(%0) {shape=[s0*s1]}
  return %1
})"),
            R"(graph g {
  input %0 "x": float32[3, s1]
  %1: float32[s1*3] = view(%0) {shape=[s1*3]}
  return %1
}
)");
}

TEST(PassSpecialize, BindsInsideRegions) {
  const char* ir = R"(graph g {
  input %0 "p": bool[]
  input %1 "x": float32[s0, 4]
  %2: float32[s0, 4] = cond(%0, %1) {} {
    region (%3: float32[s0, 4]) {
      %4: float32[s0, 4] = fused(%3) {kind="elementwise"} {
        region (%5: float32[s0, 4]) {
          %6: float32[s0, 4] = exp(%5) {}
          yield %6
        }
      }
      yield %4
    }
    region (%7: float32[s0, 4]) {
      %8: float32[s0, 4] = neg(%7) {}
      yield %8
    }
  }
  return %2
})";
  std::string out = run_passes("specialize{s0=5}", ir);  // verified after the pass
  EXPECT_EQ(out.find("s0"), std::string::npos) << out;
  EXPECT_NE(out.find("%6: float32[5, 4] = exp(%5)"), std::string::npos) << out;
}

TEST(PassSpecialize, NothingBoundChangesNothing) {
  const char* ir = R"(graph g {
  input %0 "x": float32[s0, 4]
  %1: float32[s0, 4] = relu(%0) {}
  return %1
})";
  std::unique_ptr<ir::Graph> g = parse(ir);
  PassReport report = PassManager("specialize").run(*g);
  EXPECT_FALSE(report.passes[0].changed);
  EXPECT_EQ(report.passes[0].summary, "nothing bound: 0 types and attributes");
  EXPECT_EQ(ir::print_graph(*g), ir::print_graph(*parse(ir)));
  g = parse(ir);
  EXPECT_EQ(PassManager("specialize{s0=6}").run(*g).passes[0].summary,
            "s0=6: 2 types and attributes");
  // allow_one=1 binds size 1, which export compares with a trace at size 1.
  g = parse(ir);
  EXPECT_EQ(PassManager("specialize{s0=1,allow_one=1}").run(*g).passes[0].summary,
            "s0=1: 2 types and attributes");
}

TEST(PassSpecialize, RejectsSizesBelowTwoAndUnknownOptions) {
  expect_error([] { PassManager("specialize{s0=1}"); },
               {"[specialize] expected a size of at least 2 for s0, found 1",
                "Fix: symbolic dims stand for sizes >= 2"});
  expect_error([] { PassManager("specialize{batch=4}"); }, {"batch", "specialize"});
  expect_error([] { PassManager("specialize{s0=big}"); }, {"expected an integer, found 'big'"});
}

TEST(PassSpecialize, RejectsTypesTheOpsDoNotInfer) {
  // Not what the tracer writes: a view to s0 + 1 elements, recorded as a plain size.
  std::unique_ptr<ir::Graph> g = parse(R"(graph g {
  input %0 "x": float32[s0, 2]
  %1: float32[s0, 2] = relu(%0) {}
  %2: float32[7, 2] = add(%1, %1) {}
  return %2
})");
  expect_error([&] { PassManager("specialize{s0=3}").run(*g); },
               {"[specialize] add %2 expected type float32[3, 2] from its specialized inputs, "
                "found float32[7, 2]",
                "Fix: the graph's symbolic sizes must come from kiln's tracer"});
}

TEST(PassSpecialize, SpecializedGraphsComputeTheSameAndPlanStatically) {
  const char* ir = R"(graph g {
  input %0 "x": float32[s0, 12]
  input %1 "w": float32[12, 6]
  %2: float32[s0, 6] = matmul(%0, %1) {}
  %3: float32[s0, 6] = softmax(%2) {dim=-1}
  %4: float32[s0, 6] = neg(%3) {}
  return %4
})";
  init();
  Generator gen(4);
  std::vector<Tensor> in{randn({7, 12}, {}, &gen), randn({12, 6}, {}, &gen)};
  std::vector<Tensor> want = interp::Executable(parse(ir)).run(in);
  std::shared_ptr<ir::Graph> specialized = parse(ir);
  PassManager("specialize{s0=7}").run(*specialized);
  std::vector<Tensor> got = interp::Executable(specialized).run(in);
  EXPECT_EQ(got[0].to_vector<float>(), want[0].to_vector<float>());

  cpu::compiler::CompilerOptions options;
  options.pipeline = "specialize{s0=7}," + default_pipeline();
  cpu::compiler::CompiledGraph compiled(*parse(ir), options);
  // Static sizes: buffers planned once, not per input size.
  EXPECT_EQ(compiled.stats().memory.find("per input size"), std::string::npos)
      << compiled.stats().str();
  std::vector<Tensor> native = compiled.run(in);
  std::vector<float> n = native[0].to_vector<float>(), w = want[0].to_vector<float>();
  for (size_t i = 0; i < n.size(); ++i) EXPECT_NEAR(n[i], w[i], 1e-6) << i;
}

}  // namespace
}  // namespace kiln::passes
