// decompose: softmax, log_softmax and layer_norm over the last dim become row reductions and
// elementwise ops (IR text in, checked IR text out); the cases it must leave alone; and that
// the decomposed graphs compute what the eager kernels did (reference executor, before vs
// after) within rounding, -inf, inf and 1e30 rows included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pass_manager.h"
#include "passes/pass_test_util.h"
#include "test_util.h"

namespace kiln::passes {
namespace {

using testing::parse;
using testing::run_passes;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The graph's text after a parse and print: what a pass that changes nothing leaves.
std::string unchanged(std::string_view ir) {
  return ir::print_graph(*parse(ir));
}

// Runs `g` with the tensors in `by_name` for its non-constant inputs.
std::vector<Tensor> run(std::shared_ptr<const ir::Graph> g,
                        const std::map<std::string, Tensor>& by_name) {
  std::vector<Tensor> inputs;
  for (const ir::GraphInput& in : g->inputs())
    inputs.push_back(in.kind == ir::InputKind::Constant ? Tensor() : by_name.at(in.name));
  return interp::Executable(std::move(g)).run(inputs);
}

// Runs `ir` before and after `pipeline` through the reference executor on `by_name` and
// checks that each element of output i agrees within `rtol` of max(|before|, |after|,
// scales[i]) (exactly where either is infinite, NaN exactly where the other is NaN).
// scales[i] (0 when absent) is the size that rounding errors are relative to where a result
// can be much smaller than its operands: log_softmax's x - (m + log s) in eager rounds at
// |m|, a row mean at the size of the row's values.
void expect_close(std::string_view pipeline, std::string_view ir,
                  const std::map<std::string, Tensor>& by_name, double rtol,
                  const std::vector<double>& scales = {}) {
  std::shared_ptr<ir::Graph> before = parse(ir);
  std::shared_ptr<ir::Graph> after = parse(ir);
  PassManager(pipeline, testing::test_pipeline_options()).run(*after);
  std::vector<Tensor> want = run(before, by_name), got = run(after, by_name);
  EXPECT_EQ(want.size(), got.size());
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    EXPECT_EQ(want[i].dtype(), got[i].dtype()) << "output " << i;
    EXPECT_EQ(Shape(want[i].sizes()), Shape(got[i].sizes())) << "output " << i;
    std::vector<double> w = want[i].to_vector<double>(), h = got[i].to_vector<double>();
    double scale = i < scales.size() ? scales[i] : 0;
    double tiny = want[i].dtype() == DType::Float64 ? std::numeric_limits<double>::min()
                                                    : std::numeric_limits<float>::min();
    for (size_t k = 0; k < std::min(w.size(), h.size()); ++k) {
      if (std::isnan(w[k]) || std::isnan(h[k]) || std::isinf(w[k]) || std::isinf(h[k])) {
        EXPECT_TRUE(w[k] == h[k] || (std::isnan(w[k]) && std::isnan(h[k])))
            << "output " << i << " element " << k << ": " << w[k] << " vs " << h[k];
        continue;
      }
      // Eigen's vectorized exp clamps its argument, so exp(-inf) comes out as a subnormal
      // or as 0 depending on where the element falls in a SIMD packet: below the smallest
      // normal number values are equal.
      if (w[k] == h[k] || std::max(std::abs(w[k]), std::abs(h[k])) < tiny) continue;
      double diff = std::abs(w[k] - h[k]) / std::max({std::abs(w[k]), std::abs(h[k]), scale});
      EXPECT_LE(diff, rtol) << "output " << i << " element " << k << ": " << w[k] << " vs " << h[k]
                            << "\nafter " << pipeline << ":\n"
                            << ir::print_graph(*after);
    }
  }
}

// `rows` x `cols` values ~ N(0, 2) times `magnitude`, as `dtype`.
Tensor random_rows(int64_t rows, int64_t cols, DType dtype, std::mt19937& rng,
                   double magnitude = 1) {
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<double> values(static_cast<size_t>(rows * cols));
  for (double& v : values) v = normal(rng) * magnitude;
  Tensor t = Tensor::from_vector<double>(values, {rows, cols});
  return dtype == DType::Float64 ? t : t.to(dtype);
}

// Rows that test the edges of a stable softmax: a few -inf entries, all -inf (x - max is
// nan: eager's result is nan too), one +inf (inf - inf: nan again), ties, and one ordinary
// row.
Tensor special_rows(DType dtype) {
  Tensor t = Tensor::from_vector<double>({1.5,   -kInf, 0.25,  -kInf, 2,     -1,     //
                                          -kInf, -kInf, -kInf, -kInf, -kInf, -kInf,  //
                                          0.5,   kInf,  1,     2,     -3,    0,      //
                                          3,     3,     3,     3,     3,     3,      //
                                          0.1,   -0.7,  4,     -2.5,  0,     -0.0},
                                         {5, 6});
  return dtype == DType::Float64 ? t : t.to(dtype);
}

double rtol_of(DType dtype) {
  return dtype == DType::Float64 ? 1e-12 : 1e-6;
}

// Whether any node of `g` or of its regions runs `op`.
bool contains_op(const ir::Graph& g, std::string_view op) {
  for (const auto& node : g.nodes()) {
    if (node->op->name == op) return true;
    for (const auto& region : node->regions)
      if (contains_op(*region, op)) return true;
  }
  return false;
}

TEST(PassDecompose, SoftmaxBecomesRowReductionsAndElementwiseOps) {
  // The scaled scores are an elementwise producer the row kernel takes in.
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float32[4, 8]
  %1: float32[4, 8] = neg(%0) {} @attn
  %2: float32[4, 8] = softmax(%1) {dim=-1} @attn
  return %2
})"),
            R"(graph g {
  input %0 "x": float32[4, 8]
  const %7 "decompose_0": float32[] = [1]
  %1: float32[4, 8] = neg(%0) {} @attn
  %3: float32[4, 1] = amax(%1) {dims=[1], keepdim=true} @attn
  %4: float32[4, 8] = sub(%1, %3) {} @attn
  %5: float32[4, 8] = exp(%4) {} @attn
  %6: float32[4, 1] = sum(%5) {dims=[1], keepdim=true} @attn
  %8: float32[4, 1] = div(%7, %6) {} @attn
  %9: float32[4, 8] = mul(%5, %8) {} @attn
  return %9
}
)");
}

TEST(PassDecompose, SoftmaxAloneStaysTheEagerKernel) {
  // Its row kernel computes exp twice, which pays only when fusion saves a round trip too;
  // log_softmax (one exp) is decomposed alone.
  std::unique_ptr<ir::Graph> g = parse(R"(graph g {
  input %0 "x": float32[8, 8]
  %1: float32[8, 8] = softmax(%0) {dim=-1}
  %2: float32[8, 8] = log_softmax(%0) {dim=-1}
  %3: float32[8, 8] = matmul(%1, %2) {}
  return %3
})");
  PassManager("decompose", testing::test_pipeline_options()).run(*g);
  EXPECT_TRUE(contains_op(*g, "softmax")) << ir::print_graph(*g);
  EXPECT_FALSE(contains_op(*g, "log_softmax")) << ir::print_graph(*g);
}

TEST(PassDecompose, LogSoftmaxSubtractsTheLogOfTheRowSum) {
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float64[2, 3, 5]
  %1: float64[2, 3, 5] = log_softmax(%0) {dim=2}
  %2: float64[2, 3, 5] = neg(%1) {}
  return %2
})"),
            R"(graph g {
  input %0 "x": float64[2, 3, 5]
  %3: float64[2, 3, 1] = amax(%0) {dims=[2], keepdim=true}
  %4: float64[2, 3, 5] = sub(%0, %3) {}
  %5: float64[2, 3, 5] = exp(%4) {}
  %6: float64[2, 3, 1] = sum(%5) {dims=[2], keepdim=true}
  %7: float64[2, 3, 1] = log(%6) {}
  %8: float64[2, 3, 5] = sub(%4, %7) {}
  %2: float64[2, 3, 5] = neg(%8) {}
  return %2
}
)");
}

// All three results are replaced; mean and rstd keep layer_norm's [*, 1] statistics shape,
// which is the keepdim reduction's. The symbolic batch dim stays symbolic.
TEST(PassDecompose, LayerNormBecomesRowReductionsWithItsStatistics) {
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float32[s0, 8]
  param %1 "ln.weight": float32[8]
  param %2 "ln.bias": float32[8]
  %3, %4, %5: float32[s0, 8], float32[s0, 1], float32[s0, 1] = layer_norm(%0, %1, %2) {normalized_shape=[8], eps=1e-05} @ln
  return %3, %4, %5
})"),
            R"(graph g {
  input %0 "x": float32[s0, 8]
  param %1 "ln.weight": float32[8]
  param %2 "ln.bias": float32[8]
  const %6 "decompose_0": float32[] = [8]
  const %13 "decompose_1": float32[] = [1e-05]
  %7: float32[s0, 1] = sum(%0) {dims=[1], keepdim=true} @ln
  %8: float32[s0, 1] = div(%7, %6) {} @ln
  %9: float32[s0, 8] = sub(%0, %8) {} @ln
  %10: float32[s0, 8] = mul(%9, %9) {} @ln
  %11: float32[s0, 1] = sum(%10) {dims=[1], keepdim=true} @ln
  %12: float32[s0, 1] = div(%11, %6) {} @ln
  %14: float32[s0, 1] = add(%12, %13) {} @ln
  %15: float32[s0, 1] = rsqrt(%14) {} @ln
  %16: float32[s0, 8] = mul(%9, %15) {} @ln
  %17: float32[s0, 8] = mul(%16, %1) {} @ln
  %18: float32[s0, 8] = add(%17, %2) {} @ln
  return %18, %8, %15
}
)");
}

TEST(PassDecompose, LayerNormsShareConstantsOfOneDtypeAndValue) {
  // Both norms divide by 4 with eps 4: one constant serves all three reads; the float64
  // norm gets its own.
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float32[2, 4]
  input %1 "y": float64[4]
  %2, %3, %4: float32[2, 4], float32[2, 1], float32[2, 1] = layer_norm(%0, _, _) {normalized_shape=[4], eps=4}
  %5, %6, %7: float32[2, 4], float32[2, 1], float32[2, 1] = layer_norm(%2, _, _) {normalized_shape=[4], eps=4}
  %8, %9, %10: float64[4], float64[1], float64[1] = layer_norm(%1, _, _) {normalized_shape=[4], eps=4}
  return %5, %8
})"),
            R"(graph g {
  input %0 "x": float32[2, 4]
  input %1 "y": float64[4]
  const %11 "decompose_0": float32[] = [4]
  const %30 "decompose_1": float64[] = [4]
  %12: float32[2, 1] = sum(%0) {dims=[1], keepdim=true}
  %13: float32[2, 1] = div(%12, %11) {}
  %14: float32[2, 4] = sub(%0, %13) {}
  %15: float32[2, 4] = mul(%14, %14) {}
  %16: float32[2, 1] = sum(%15) {dims=[1], keepdim=true}
  %17: float32[2, 1] = div(%16, %11) {}
  %18: float32[2, 1] = add(%17, %11) {}
  %19: float32[2, 1] = rsqrt(%18) {}
  %20: float32[2, 4] = mul(%14, %19) {}
  %21: float32[2, 1] = sum(%20) {dims=[1], keepdim=true}
  %22: float32[2, 1] = div(%21, %11) {}
  %23: float32[2, 4] = sub(%20, %22) {}
  %24: float32[2, 4] = mul(%23, %23) {}
  %25: float32[2, 1] = sum(%24) {dims=[1], keepdim=true}
  %26: float32[2, 1] = div(%25, %11) {}
  %27: float32[2, 1] = add(%26, %11) {}
  %28: float32[2, 1] = rsqrt(%27) {}
  %29: float32[2, 4] = mul(%23, %28) {}
  %31: float64[1] = sum(%1) {dims=[0], keepdim=true}
  %32: float64[1] = div(%31, %30) {}
  %33: float64[4] = sub(%1, %32) {}
  %34: float64[4] = mul(%33, %33) {}
  %35: float64[1] = sum(%34) {dims=[0], keepdim=true}
  %36: float64[1] = div(%35, %30) {}
  %37: float64[1] = add(%36, %30) {}
  %38: float64[1] = rsqrt(%37) {}
  %39: float64[4] = mul(%33, %38) {}
  return %29, %39
}
)");
}

TEST(PassDecompose, LeavesNoDeadNodesOrUnreadConstants) {
  // Only the mean is read: the variance chain and its eps constant are not left behind.
  // The softmax nobody reads is not expanded (dce removes it whole).
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float32[3, 5]
  %1, %2, %3: float32[3, 5], float32[3, 1], float32[3, 1] = layer_norm(%0, _, _) {normalized_shape=[5], eps=1e-05}
  %4: float32[3, 5] = softmax(%0) {dim=1}
  return %2
})"),
            R"(graph g {
  input %0 "x": float32[3, 5]
  const %5 "decompose_0": float32[] = [5]
  %6: float32[3, 1] = sum(%0) {dims=[1], keepdim=true}
  %7: float32[3, 1] = div(%6, %5) {}
  %4: float32[3, 5] = softmax(%0) {dim=1}
  return %7
}
)");
}

TEST(PassDecompose, KeepsSymbolicDims) {
  // A symbolic last dim is >= 2 at run time, so amax always has a row to reduce.
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float32[s0, 4, s1]
  %1: float32[s0, 4, s1] = softmax(%0) {dim=-1}
  %2: float32[s0, 4, s1] = neg(%1) {}
  return %2
})"),
            R"(graph g {
  input %0 "x": float32[s0, 4, s1]
  const %7 "decompose_0": float32[] = [1]
  %3: float32[s0, 4, 1] = amax(%0) {dims=[2], keepdim=true}
  %4: float32[s0, 4, s1] = sub(%0, %3) {}
  %5: float32[s0, 4, s1] = exp(%4) {}
  %6: float32[s0, 4, 1] = sum(%5) {dims=[2], keepdim=true}
  %8: float32[s0, 4, 1] = div(%7, %6) {}
  %9: float32[s0, 4, s1] = mul(%5, %8) {}
  %2: float32[s0, 4, s1] = neg(%9) {}
  return %2
}
)");
}

TEST(PassDecompose, DecomposesInsideControlFlowWithConstantsAsFills) {
  // A region sees only its own inputs, so its constants are rank-0 fills.
  const char* ir = R"(graph g {
  input %0 "p": bool[]
  input %1 "x": float32[3, 4]
  %2: float32[3, 4] = cond(%0, %1) {} {
    region (%3: float32[3, 4]) {
      %4: float32[3, 4] = softmax(%3) {dim=1}
      %9: float32[3, 4] = neg(%4) {}
      yield %9
    }
    region (%5: float32[3, 4]) {
      %6, %7, %8: float32[3, 4], float32[3, 1], float32[3, 1] = layer_norm(%5, _, _) {normalized_shape=[4], eps=0.001}
      yield %6
    }
  }
  return %2
})";
  EXPECT_EQ(run_passes("decompose", ir), R"(graph g {
  input %0 "p": bool[]
  input %1 "x": float32[3, 4]
  %2: float32[3, 4] = cond(%0, %1) {} {
    region (%3: float32[3, 4]) {
      %10: float32[3, 1] = amax(%3) {dims=[1], keepdim=true}
      %11: float32[3, 4] = sub(%3, %10) {}
      %12: float32[3, 4] = exp(%11) {}
      %13: float32[3, 1] = sum(%12) {dims=[1], keepdim=true}
      %14: float32[] = full() {shape=[], value=1, dtype=float32, device=cpu}
      %15: float32[3, 1] = div(%14, %13) {}
      %16: float32[3, 4] = mul(%12, %15) {}
      %9: float32[3, 4] = neg(%16) {}
      yield %9
    }
    region (%5: float32[3, 4]) {
      %17: float32[] = full() {shape=[], value=4, dtype=float32, device=cpu}
      %18: float32[3, 1] = sum(%5) {dims=[1], keepdim=true}
      %19: float32[3, 1] = div(%18, %17) {}
      %20: float32[3, 4] = sub(%5, %19) {}
      %21: float32[3, 4] = mul(%20, %20) {}
      %22: float32[3, 1] = sum(%21) {dims=[1], keepdim=true}
      %23: float32[3, 1] = div(%22, %17) {}
      %24: float32[] = full() {shape=[], value=0.001, dtype=float32, device=cpu}
      %25: float32[3, 1] = add(%23, %24) {}
      %26: float32[3, 1] = rsqrt(%25) {}
      %27: float32[3, 4] = mul(%20, %26) {}
      yield %27
    }
  }
  return %2
}
)");
  std::mt19937 rng(5);
  for (bool p : {true, false})
    expect_close("decompose", ir,
                 {{"p", Tensor::scalar(p)}, {"x", random_rows(3, 4, DType::Float32, rng)}}, 1e-6,
                 {1});
}

TEST(PassDecompose, LeavesOtherDimsShapesDevicesAndFusedRegionsAlone) {
  const char* cases[] = {
      // softmax over a dim that is not the last
      R"(graph g {
  input %0 "x": float32[4, 8]
  %1: float32[4, 8] = softmax(%0) {dim=0}
  %2: float32[4, 8] = log_softmax(%0) {dim=-2}
  return %1, %2
})",
      // layer_norm over the two trailing dims
      R"(graph g {
  input %0 "x": float32[2, 3, 4]
  %1, %2, %3: float32[2, 3, 4], float32[2, 1, 1], float32[2, 1, 1] = layer_norm(%0, _, _) {normalized_shape=[3, 4], eps=1e-05}
  return %1
})",
      // an empty last dim: amax has nothing to reduce
      R"(graph g {
  input %0 "x": float32[2, 0]
  %1: float32[2, 0] = softmax(%0) {dim=1}
  return %1
})",
      // a rank-0 input
      R"(graph g {
  input %0 "x": float32[]
  %1: float32[] = softmax(%0) {dim=-1}
  return %1
})",
      // another device
      R"(graph g {
  input %0 "x": float32[4, 8]@cuda:0
  %1: float32[4, 8]@cuda:0 = softmax(%0) {dim=1}
  return %1
})",
      // a fusion group is one kernel already
      R"(graph g {
  input %0 "x": float32[4, 8]
  %1: float32[4, 8] = fused(%0) {kind="row"} {
    region (%2: float32[4, 8]) {
      %3: float32[4, 8] = softmax(%2) {dim=1}
      yield %3
    }
  }
  return %1
})",
  };
  for (const char* ir : cases) EXPECT_EQ(run_passes("decompose", ir), unchanged(ir));
}

TEST(PassDecompose, LeavesOtherDtypesAlone) {
  // The ops' infer rejects these dtypes, so the graphs are run through the pass unverified:
  // the pass must not rewrite what it cannot type (integers, storage-only floats).
  const char* ir = R"(graph g {
  input %0 "x": int32[4, 8]
  input %1 "h": float16[4, 8]
  input %2 "b": bfloat16[2, 4]
  %3: int32[4, 8] = softmax(%0) {dim=1}
  %4: float16[4, 8] = log_softmax(%1) {dim=1}
  %5, %6, %7: bfloat16[2, 4], bfloat16[2, 1], bfloat16[2, 1] = layer_norm(%2, _, _) {normalized_shape=[4], eps=1e-05}
  return %3, %4, %5
})";
  std::unique_ptr<ir::Graph> g = parse(ir);
  ASSERT_NE(find_pass("decompose"), nullptr);
  std::unique_ptr<Pass> pass = find_pass("decompose")->create(PassOptions());
  PassContext context;
  context.fusion = &cpu::compiler::fusion_rules();
  EXPECT_FALSE(pass->run(*g, context));
  EXPECT_EQ(ir::print_graph(*g), unchanged(ir));
  EXPECT_EQ(pass->summary(), "0 ops into 0");
}

TEST(PassDecompose, ReportsHowManyOpsBecameHowManyNodes) {
  const char* ir = R"(graph g {
  input %0 "x": float32[2, 6]
  %1: float32[2, 6] = softmax(%0) {dim=1}
  %6: float32[2, 6] = neg(%1) {}
  %2: float32[2, 6] = log_softmax(%6) {dim=1}
  %3, %4, %5: float32[2, 6], float32[2, 1], float32[2, 1] = layer_norm(%2, _, _) {normalized_shape=[6], eps=1e-05}
  return %3
})";
  std::unique_ptr<ir::Graph> g = parse(ir);
  PassReport report = PassManager("decompose", testing::test_pipeline_options()).run(*g);
  ASSERT_EQ(report.passes.size(), 1u);
  EXPECT_TRUE(report.passes[0].changed);
  EXPECT_EQ(report.passes[0].summary, "3 ops into 21");  // 6 + 6 + 9
  EXPECT_EQ(report.passes[0].nodes_after, 22u);          // and the neg
  report = PassManager("decompose", testing::test_pipeline_options()).run(*g);
  EXPECT_FALSE(report.passes[0].changed);
  EXPECT_EQ(report.passes[0].summary, "0 ops into 0");
  g = parse(R"(graph g {
  input %0 "x": float32[2, 6]
  %1: float32[2, 6] = softmax(%0) {dim=1}
  %2: float32[2, 6] = neg(%1) {}
  return %2
})");
  // Decomposing pays only through fusion: without a backend's fusion rules nothing changes.
  PassReport alone = PassManager("decompose").run(*g);
  EXPECT_FALSE(alone.passes[0].changed);
  EXPECT_EQ(alone.passes[0].summary, "no backend's fusion rules: nothing decomposed");
  EXPECT_EQ(PassManager("decompose", testing::test_pipeline_options()).run(*g).passes[0].summary,
            "1 op into 6");
}

TEST(PassDecompose, TakesNoOptions) {
  expect_error([] { PassManager("decompose{max-ops=3}"); },
               {"'decompose'", "max-ops", "takes no options", "Fix:"});
}

// ---- numerics: the reference executor before (eager kernels) vs after ----

const char* kSoftmaxes = R"(graph g {
  input %0 "x": {T}[5, 6]
  %1: {T}[5, 6] = softmax(%0) {dim=1}
  %2: {T}[5, 6] = log_softmax(%0) {dim=-1}
  %3: {T}[5, 6] = neg(%1) {}
  return %3, %2
})";

std::string with_dtype(std::string text, DType dtype) {
  std::string name = dtype == DType::Float64 ? "float64" : "float32";
  for (size_t at; (at = text.find("{T}")) != std::string::npos;) text.replace(at, 3, name);
  return text;
}

TEST(PassDecompose, SoftmaxesMatchTheEagerKernelsOnSpecialRows) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype == DType::Float64 ? "float64" : "float32");
    Tensor x = special_rows(dtype);
    // log_softmax's eager x - (max + log sum) rounds at the size of the row's values.
    expect_close("decompose", with_dtype(kSoftmaxes, dtype), {{"x", x}}, rtol_of(dtype), {0, 4});
    // NaN exactly where eager has it: the all -inf row and the row holding +inf.
    std::shared_ptr<ir::Graph> after = parse(with_dtype(kSoftmaxes, dtype));
    PassManager("decompose", testing::test_pipeline_options()).run(*after);
    std::vector<double> y = run(after, {{"x", x}})[0].to_vector<double>();
    for (size_t k = 0; k < y.size(); ++k)
      EXPECT_EQ(std::isnan(y[k]), k / 6 == 1 || k / 6 == 2) << "element " << k;
    double smallest_normal = dtype == DType::Float64 ? std::numeric_limits<double>::min()
                                                     : std::numeric_limits<float>::min();
    EXPECT_LT(std::abs(y[1]), smallest_normal)
        << "exp(-inf - max) is 0 (or a subnormal, see above)";
  }
}

TEST(PassDecompose, SoftmaxesMatchTheEagerKernelsOnRandomAndLargeRows) {
  std::mt19937 rng(11);
  const char* ir = R"(graph g {
  input %0 "x": {T}[s0, 33]
  %1: {T}[s0, 33] = softmax(%0) {dim=1}
  %2: {T}[s0, 33] = neg(%1) {}
  return %2
})";
  for (DType dtype : {DType::Float32, DType::Float64})
    for (double magnitude : {1.0, 1e30}) {
      SCOPED_TRACE(std::to_string(magnitude));
      Tensor x = random_rows(7, 33, dtype, rng, magnitude);
      expect_close("decompose", with_dtype(ir, dtype), {{"x", x}}, rtol_of(dtype));
      // Against log_softmax the rounding of eager's max + log(sum) counts at |max|.
      expect_close("decompose", with_dtype(kSoftmaxes, dtype),
                   {{"x", random_rows(5, 6, dtype, rng, magnitude)}}, rtol_of(dtype),
                   {0, 8 * magnitude});
    }
}

TEST(PassDecompose, LayerNormMatchesTheEagerKernelWithAndWithoutAffine) {
  const char* with_both = R"(graph g {
  input %0 "x": {T}[s0, 16]
  input %1 "w": {T}[16]
  input %2 "b": {T}[16]
  %3, %4, %5: {T}[s0, 16], {T}[s0, 1], {T}[s0, 1] = layer_norm(%0, %1, %2) {normalized_shape=[16], eps=1e-05}
  return %3, %4, %5
})";
  const char* weight_only = R"(graph g {
  input %0 "x": {T}[3, 2, 16]
  input %1 "w": {T}[16]
  %3, %4, %5: {T}[3, 2, 16], {T}[3, 2, 1], {T}[3, 2, 1] = layer_norm(%0, %1, _) {normalized_shape=[16], eps=0.5}
  return %3
})";
  const char* bias_only = R"(graph g {
  input %0 "x": {T}[6, 16]
  input %2 "b": {T}[16]
  %3, %4, %5: {T}[6, 16], {T}[6, 1], {T}[6, 1] = layer_norm(%0, _, %2) {normalized_shape=[16], eps=1e-05}
  return %3, %5
})";
  const char* neither = R"(graph g {
  input %0 "x": {T}[6, 16]
  %3, %4, %5: {T}[6, 16], {T}[6, 1], {T}[6, 1] = layer_norm(%0, _, _) {normalized_shape=[16], eps=1e-05}
  return %3, %4, %5
})";
  std::mt19937 rng(3);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype == DType::Float64 ? "float64" : "float32");
    std::map<std::string, Tensor> by_name{{"w", random_rows(1, 16, dtype, rng).view({16})},
                                          {"b", random_rows(1, 16, dtype, rng).view({16})}};
    // Which results each graph returns: y, mean or rstd.
    struct Case {
      const char* ir;
      Shape x;
      std::string returns;
    };
    for (const Case& c : {Case{with_both, {6, 16}, "ymr"}, Case{weight_only, {3, 2, 16}, "y"},
                          Case{bias_only, {6, 16}, "yr"}, Case{neither, {6, 16}, "ymr"}})
      for (double magnitude : {1.0, 1e30}) {
        // float32 squares of 1e30 overflow in both (var = inf, rstd = 0): still equal.
        by_name["x"] = random_rows(6, 16, dtype, rng, magnitude).view(c.x);
        // Centering cancels at the size of the row's values, which normalizing makes 1; the
        // mean's rounding is at the size of the row's values.
        std::vector<double> scales;
        for (char r : c.returns) scales.push_back(r == 'y' ? 1 : r == 'm' ? magnitude : 0);
        expect_close("decompose", with_dtype(c.ir, dtype), by_name, rtol_of(dtype), scales);
      }
  }
}

TEST(PassDecompose, EvalBatchNormBecomesAPerChannelScaleAndShift) {
  EXPECT_EQ(run_passes("decompose", R"(graph g {
  input %0 "x": float32[s0, 3, 5, 5]
  param %1 "w": float32[3]
  param %2 "b": float32[3]
  buffer %3 "mean": float32[3]
  buffer %4 "var": float32[3]
  %5, %6, %7: float32[s0, 3, 5, 5], float32[3], float32[3] = batch_norm(%0, %1, %2, %3, %4) {training=false, momentum=0.1, eps=1e-05} @bn
  return %5, %7
})"),
            R"(graph g {
  input %0 "x": float32[s0, 3, 5, 5]
  param %1 "w": float32[3]
  param %2 "b": float32[3]
  buffer %3 "mean": float32[3]
  buffer %4 "var": float32[3]
  const %8 "decompose_0": float32[] = [1e-05]
  %9: float32[3] = add(%4, %8) {} @bn
  %10: float32[3] = rsqrt(%9) {} @bn
  %11: float32[3] = mul(%1, %10) {} @bn
  %12: float32[3] = mul(%3, %11) {} @bn
  %13: float32[3] = sub(%2, %12) {} @bn
  %14: float32[3, 1, 1] = view(%11) {shape=[3, 1, 1]} @bn
  %15: float32[s0, 3, 5, 5] = mul(%0, %14) {} @bn
  %16: float32[3, 1, 1] = view(%13) {shape=[3, 1, 1]} @bn
  %17: float32[s0, 3, 5, 5] = add(%15, %16) {} @bn
  return %17, %10
}
)");
  // Training mode (batch statistics, running-stat updates) stays one op.
  const char* training = R"(graph g {
  input %0 "x": float32[4, 3]
  buffer %3 "mean": float32[3]
  buffer %4 "var": float32[3]
  %5, %6, %7, %8, %9: float32[4, 3], float32[3], float32[3], float32[3], float32[3] = batch_norm(%0, _, _, %3, %4) {training=true, momentum=0.1, eps=1e-05}
  return %5, %8, %9
})";
  EXPECT_EQ(run_passes("decompose", training), unchanged(training));
}

TEST(PassDecompose, EvalBatchNormMatchesTheEagerKernel) {
  // With and without the affine parameters, rank 2 (no views) and rank 4.
  const char* affine = R"(graph g {
  input %0 "x": {T}[4, 6, 3, 3]
  input %1 "w": {T}[6]
  input %2 "b": {T}[6]
  input %3 "mean": {T}[6]
  input %4 "var": {T}[6]
  %5, %6, %7: {T}[4, 6, 3, 3], {T}[6], {T}[6] = batch_norm(%0, %1, %2, %3, %4) {training=false, momentum=0.1, eps=0.001}
  return %5, %6, %7
})";
  const char* plain = R"(graph g {
  input %0 "x": {T}[5, 6]
  input %3 "mean": {T}[6]
  input %4 "var": {T}[6]
  %5, %6, %7: {T}[5, 6], {T}[6], {T}[6] = batch_norm(%0, _, _, %3, %4) {training=false, momentum=0.1, eps=1e-05}
  return %5
})";
  std::mt19937 rng(5);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype == DType::Float64 ? "float64" : "float32");
    std::map<std::string, Tensor> by_name{{"w", random_rows(1, 6, dtype, rng).view({6})},
                                          {"b", random_rows(1, 6, dtype, rng).view({6})},
                                          {"mean", random_rows(1, 6, dtype, rng).view({6})},
                                          {"var", random_rows(1, 6, dtype, rng).view({6}).abs()}};
    by_name["x"] = random_rows(4, 54, dtype, rng).view({4, 6, 3, 3});
    // y = x * scale + shift cancels where x is near the mean: rounding at the size of x.
    expect_close("decompose", with_dtype(affine, dtype), by_name, rtol_of(dtype), {4, 0, 0});
    by_name["x"] = random_rows(5, 6, dtype, rng);
    expect_close("decompose", with_dtype(plain, dtype), by_name, rtol_of(dtype), {4});
  }
}

// The pattern decompose exists for: attention's softmax(q.k * scale + mask), through the
// whole default pipeline. No softmax is left for the backend to run on its own.
TEST(PassDecompose, DefaultPipelineDecomposesAttentionScores) {
  const char* ir = R"(graph g {
  input %0 "q": float32[2, 5, 8]
  input %1 "k": float32[2, 8, 5]
  input %2 "mask": float32[5, 5]
  const %3 "scale": float32[] = [0.35355339]
  %4: float32[2, 5, 5] = matmul(%0, %1) {}
  %5: float32[2, 5, 5] = mul(%4, %3) {}
  %6: float32[2, 5, 5] = add(%5, %2) {}
  %7: float32[2, 5, 5] = softmax(%6) {dim=-1}
  return %7
})";
  std::unique_ptr<ir::Graph> g = parse(ir);
  PassManager(default_pipeline(), testing::test_pipeline_options()).run(*g);
  EXPECT_FALSE(contains_op(*g, "softmax")) << ir::print_graph(*g);
  EXPECT_TRUE(contains_op(*g, "amax")) << ir::print_graph(*g);
  std::mt19937 rng(8);
  Tensor mask = random_rows(5, 5, DType::Float32, rng);
  mask = Tensor::from_vector<float>(
      [&] {
        std::vector<float> m = mask.to_vector<float>();
        for (size_t i = 0; i < m.size(); ++i)
          if (i % 5 > i / 5) m[i] = -std::numeric_limits<float>::infinity();  // causal
        return m;
      }(),
      {5, 5});
  expect_close(default_pipeline(), ir,
               {{"q", random_rows(10, 8, DType::Float32, rng).view({2, 5, 8})},
                {"k", random_rows(16, 5, DType::Float32, rng).view({2, 8, 5})},
                {"mask", mask}},
               1e-6);
}

}  // namespace
}  // namespace kiln::passes
