// canonicalize: identities, no-op ops, view and permute chains, constant folding; and the
// cases each rule must leave alone (broadcasting, non-identity constants, layouts a view
// reads, results the graph returns, random and side-effect ops, the folding size limit).
#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "test_util.h"

namespace kiln::passes {
namespace {

using testing::expect_same_results;
using testing::run_passes;

const char* kIdentities =
    "graph g {\n"
    "  input %0 \"x\": float32[4]\n"
    "  input %1 \"i\": int64[3]\n"
    "  const %2 \"one\": float32[4] = [1, 1, 1, 1]\n"
    "  const %3 \"minus_zero\": float32[] = [-0]\n"
    "  const %4 \"zero\": float32[] = [0]\n"
    "  const %5 \"int_zero\": int64[3] = [0, 0, 0]\n"
    "  %6: float32[4] = relu(%0) {}\n"
    "  %7: float32[4] = mul(%6, %2) {}\n"
    "  %8: float32[4] = mul(%2, %7) {}\n"
    "  %9: float32[4] = add(%8, %3) {}\n"
    "  %10: float32[4] = add(%3, %9) {}\n"
    "  %11: float32[4] = sub(%10, %4) {}\n"
    "  %12: float32[4] = div(%11, %2) {}\n"
    "  %13: float32[4] = mul(%0, %2) {}\n"
    "  %14: float32[4] = exp(%13) {}\n"
    "  %15: int64[3] = add(%5, %1) {}\n"
    "  %16: int64[3] = mul(%15, %15) {}\n"
    "  return %12, %14, %16\n"
    "}\n";

TEST(PassCanonicalize, RemovesIdentitiesWithConstants) {
  EXPECT_EQ(run_passes("canonicalize,dce", kIdentities),
            "graph g {\n"
            "  input %0 \"x\": float32[4]\n"
            "  input %1 \"i\": int64[3]\n"
            "  const %2 \"one\": float32[4] = [1, 1, 1, 1]\n"
            "  const %3 \"minus_zero\": float32[] = [-0]\n"
            "  const %4 \"zero\": float32[] = [0]\n"
            "  const %5 \"int_zero\": int64[3] = [0, 0, 0]\n"
            "  %6: float32[4] = relu(%0) {}\n"
            "  %14: float32[4] = exp(%0) {}\n"
            "  %16: int64[3] = mul(%1, %1) {}\n"
            "  return %6, %14, %16\n"
            "}\n");
  expect_same_results("canonicalize,dce", kIdentities);
}

TEST(PassCanonicalize, KeepsIdentitiesThatChangeTypesOrAreNotIdentities) {
  // Broadcasting to a new shape, a constant with one non-zero element, 0 - x and 1 / x,
  // float x + (+0) and x - (-0) (both turn -0 into +0), a result the graph returns (it
  // must not alias the input), and a result a view reads (the input may be strided, the
  // product is contiguous).
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  const %1 \"ones\": float32[3, 4] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
      "  const %2 \"almost_zero\": float32[4] = [-0, 1, -0, -0]\n"
      "  const %3 \"zero\": float32[4] = [0, 0, 0, 0]\n"
      "  const %4 \"one\": float32[4] = [1, 1, 1, 1]\n"
      "  const %5 \"minus_zero\": float32[4] = [-0, -0, -0, -0]\n"
      "  %6: float32[3, 4] = mul(%0, %1) {}\n"
      "  %7: float32[4] = add(%0, %2) {}\n"
      "  %8: float32[4] = sub(%3, %0) {}\n"
      "  %9: float32[4] = div(%4, %0) {}\n"
      "  %10: float32[4] = add(%0, %3) {}\n"
      "  %11: float32[4] = exp(%10) {}\n"
      "  %12: float32[4] = sub(%0, %5) {}\n"
      "  %13: float32[4] = exp(%12) {}\n"
      "  %14: float32[4] = mul(%0, %4) {}\n"
      "  %15: float32[4] = mul(%0, %4) {}\n"
      "  %16: float32[2, 2] = view(%15) {shape=[2, 2]}\n"
      "  return %6, %7, %8, %9, %11, %13, %14, %16\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize", ir), ir);
}

TEST(PassCanonicalize, KeepsTheContiguousCopyAViewNeeds) {
  // permute(x) * 1 is a contiguous copy; the view of it works. The view of permute(x)
  // itself would fail ("cannot view ... without copying"), so the mul stays.
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[2, 3]\n"
      "  const %1 \"one\": float32[] = [1]\n"
      "  %2: float32[3, 2] = permute(%0) {dims=[1, 0]}\n"
      "  %3: float32[3, 2] = mul(%2, %1) {}\n"
      "  %4: float32[6] = view(%3) {shape=[6]}\n"
      "  return %4\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize", ir), ir);
  expect_same_results("canonicalize", ir, 1);
}

TEST(PassCanonicalize, RemovesNoOpCastsViewsAndPermutes) {
  // The cast goes on the second iteration, once the views it fed are gone: a view must not
  // read the input instead of the cast's contiguous copy.
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[2, 3]\n"
      "  input %1 \"y\": float32[2, 1, 3]\n"
      "  %2: float32[2, 3] = cast(%0) {dtype=float32}\n"
      "  %3: float32[2, 3] = expand(%2) {shape=[2, 3]}\n"
      "  %4: float32[2, 3] = permute(%3) {dims=[0, -1]}\n"
      "  %5: float32[2, 3] = view(%4) {shape=[2, 3]}\n"
      "  %6: float32[1, 2, 3] = unsqueeze(%5) {dim=0}\n"
      "  %7: float32[2, 3] = squeeze(%6) {dims=[0]}\n"
      "  %8: float32[2, 3] = exp(%7) {}\n"
      "  %9: float32[2, 3] = squeeze(%1) {dims=[1]}\n"
      "  %10: float32[2, 1, 3] = unsqueeze(%9) {dim=1}\n"
      "  %11: float32[2, 1, 3] = neg(%10) {}\n"
      "  return %8, %11\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize,dce", ir),
            "graph g {\n"
            "  input %0 \"x\": float32[2, 3]\n"
            "  input %1 \"y\": float32[2, 1, 3]\n"
            "  %8: float32[2, 3] = exp(%0) {}\n"
            "  %11: float32[2, 1, 3] = neg(%1) {}\n"
            "  return %8, %11\n"
            "}\n");
  expect_same_results("canonicalize,dce", ir);
  // One iteration is not enough for the cast.
  EXPECT_NE(run_passes("canonicalize{max-iterations=1},dce", ir).find("cast(%0)"),
            std::string::npos);
}

TEST(PassCanonicalize, KeepsDetachAndRealCasts) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[4]\n"
      "  %1: float32[4] = detach(%0) {}\n"
      "  %2: float32[4] = exp(%1) {}\n"
      "  %3: float64[4] = cast(%2) {dtype=float64}\n"
      "  %4: float32[2, 4] = expand(%2) {shape=[2, 4]}\n"
      "  %5: float32[4] = permute(%2) {dims=[0]}\n"
      "  return %3, %4, %5\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize", ir),
            "graph g {\n"
            "  input %0 \"x\": float32[4]\n"
            "  %1: float32[4] = detach(%0) {}\n"
            "  %2: float32[4] = exp(%1) {}\n"
            "  %3: float64[4] = cast(%2) {dtype=float64}\n"
            "  %4: float32[2, 4] = expand(%2) {shape=[2, 4]}\n"
            "  %5: float32[4] = permute(%2) {dims=[0]}\n"
            "  return %3, %4, %2\n"
            "}\n");
}

const char* kChains =
    "graph g {\n"
    "  input %0 \"x\": float32[2, 3, 4]\n"
    "  %1: float32[6, 4] = view(%0) {shape=[6, 4]}\n"
    "  %2: float32[24] = view(%1) {shape=[24]}\n"
    "  %3: float32[4, 3, 2] = permute(%0) {dims=[2, 1, 0]}\n"
    "  %4: float32[3, 4, 2] = permute(%3) {dims=[1, 0, 2]}\n"
    "  %5: float32[2, 3, 4] = permute(%3) {dims=[2, 1, 0]}\n"
    "  %6: float32[1, 24] = unsqueeze(%2) {dim=0}\n"
    "  %7: float32[4, 6] = view(%6) {shape=[4, 6]}\n"
    "  %8: float32[2, 3, 4] = exp(%5) {}\n"
    "  return %2, %4, %8, %7\n"
    "}\n";

TEST(PassCanonicalize, CollapsesViewAndPermuteChains) {
  EXPECT_EQ(run_passes("canonicalize,dce", kChains),
            "graph g {\n"
            "  input %0 \"x\": float32[2, 3, 4]\n"
            "  %2: float32[24] = view(%0) {shape=[24]}\n"
            "  %4: float32[3, 4, 2] = permute(%0) {dims=[1, 2, 0]}\n"
            "  %7: float32[4, 6] = view(%0) {shape=[4, 6]}\n"
            "  %8: float32[2, 3, 4] = exp(%0) {}\n"
            "  return %2, %4, %8, %7\n"
            "}\n");
  expect_same_results("canonicalize,dce", kChains);
}

TEST(PassCanonicalize, SimplifiesInsideRegions) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"p\": bool[]\n"
      "  input %1 \"x\": float32[2]\n"
      "  %2: float32[2] = cond(%0, %1) {} {\n"
      "    region (%3: float32[2]) {\n"
      "      %4: float32[2] = cast(%3) {dtype=float32}\n"
      "      %5: float32[2] = exp(%4) {}\n"
      "      yield %5\n"
      "    }\n"
      "    region (%6: float32[2]) {\n"
      "      yield %6\n"
      "    }\n"
      "  }\n"
      "  return %2\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize,dce", ir),
            "graph g {\n"
            "  input %0 \"p\": bool[]\n"
            "  input %1 \"x\": float32[2]\n"
            "  %2: float32[2] = cond(%0, %1) {} {\n"
            "    region (%3: float32[2]) {\n"
            "      %5: float32[2] = exp(%3) {}\n"
            "      yield %5\n"
            "    }\n"
            "    region (%6: float32[2]) {\n"
            "      yield %6\n"
            "    }\n"
            "  }\n"
            "  return %2\n"
            "}\n");
  expect_same_results("canonicalize,dce", ir);
}

const char* kFoldable =
    "graph g {\n"
    "  input %0 \"x\": float32[2, 2]\n"
    "  const %1 \"a\": float32[2, 2] = [1, 2, 3, 4]\n"
    "  const %2 \"b\": float32[2] = [10, 20]\n"
    "  %3: float32[2, 2] = permute(%1) {dims=[1, 0]}\n"
    "  %4: float32[2, 2] = add(%3, %2) {}\n"
    "  %5: float32[2] = full() {shape=[2], value=0.5, dtype=float32, device=cpu}\n"
    "  %6: float32[2] = mul(%5, %2) {}\n"
    "  %7: float32[2, 2] = mul(%0, %4) {}\n"
    "  %8: float32[2, 2] = sub(%7, %6) {}\n"
    "  return %8\n"
    "}\n";

TEST(PassCanonicalize, FoldsConstantsIntoNewConstantInputs) {
  // permute(a) + b = [[11, 23], [12, 24]]; 0.5 * b = [5, 10].
  EXPECT_EQ(run_passes("canonicalize,dce", kFoldable),
            "graph g {\n"
            "  input %0 \"x\": float32[2, 2]\n"
            "  const %1 \"a\": float32[2, 2] = [1, 2, 3, 4]\n"
            "  const %2 \"b\": float32[2] = [10, 20]\n"
            "  const %9 \"folded_0\": float32[2, 2] = [11, 23, 12, 24]\n"
            "  const %10 \"folded_1\": float32[2] = [5, 10]\n"
            "  %7: float32[2, 2] = mul(%0, %9) {}\n"
            "  %8: float32[2, 2] = sub(%7, %10) {}\n"
            "  return %8\n"
            "}\n");
  expect_same_results("canonicalize,dce", kFoldable);
}

TEST(PassCanonicalize, FoldingThenIdentities) {
  // ones * 1 folds to a constant of ones, which then disappears from x * ones.
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[3]\n"
      "  const %1 \"two\": float32[3] = [2, 2, 2]\n"
      "  const %2 \"half\": float32[] = [0.5]\n"
      "  %3: float32[3] = mul(%1, %2) {}\n"
      "  %4: float32[3] = relu(%0) {}\n"
      "  %5: float32[3] = mul(%4, %3) {}\n"
      "  return %5\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize,dce", ir),
            "graph g {\n"
            "  input %0 \"x\": float32[3]\n"
            "  const %1 \"two\": float32[3] = [2, 2, 2]\n"
            "  const %2 \"half\": float32[] = [0.5]\n"
            "  const %6 \"folded_0\": float32[3] = [1, 1, 1]\n"
            "  %4: float32[3] = relu(%0) {}\n"
            "  return %4\n"
            "}\n");
  expect_same_results("canonicalize,dce", ir);
}

TEST(PassCanonicalize, FoldingSkipsReturnsFillsRandomPrintsAndSymbolicShapes) {
  // A value only returned stays computed (the executor hands constants out by reference);
  // a lone fill is cheaper than a stored constant; random and printing ops run every time;
  // constants cannot have symbolic shapes.
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[s0, 2]\n"
      "  const %1 \"c\": float32[2] = [1, 2]\n"
      "  %2: float32[2] = neg(%1) {}\n"
      "  %3: float32[2] = full() {shape=[2], value=3, dtype=float32, device=cpu}\n"
      "  %4: float32[s0, 2] = mul(%0, %3) {}\n"
      "  %5: float32[2] = rand() {shape=[2], dtype=float32, device=cpu, generator=default}\n"
      "  %6: float32[2] = add(%5, %1) {}\n"
      "  %7: float32[2] = debug_print(%1) {label=\"c\"}\n"
      "  %8: float32[2] = relu(%7) {}\n"
      "  %9: float32[s0, 2] = expand(%1) {shape=[s0, 2]}\n"
      "  %10: float32[s0, 2] = mul(%0, %9) {}\n"
      "  return %2, %4, %6, %8, %10\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize", ir), ir);
}

TEST(PassCanonicalize, FoldingRespectsTheSizeLimit) {
  const char* ir =
      "graph g {\n"
      "  input %0 \"y\": float32[300, 300]\n"
      "  input %1 \"z\": float32[2, 2]\n"
      "  input %2 \"w\": float32[2, 3]\n"
      "  const %3 \"two\": float32[1] = [2]\n"
      "  const %4 \"c4\": float32[2, 2] = [1, 2, 3, 4]\n"
      "  const %5 \"c6\": float32[2, 3] = [1, 2, 3, 4, 5, 6]\n"
      "  %6: float32[300, 300] = expand(%3) {shape=[300, 300]}\n"
      "  %7: float32[300, 300] = mul(%0, %6) {}\n"
      "  %8: float32[2, 2] = neg(%4) {}\n"
      "  %9: float32[2, 2] = add(%1, %8) {}\n"
      "  %10: float32[2, 3] = neg(%5) {}\n"
      "  %11: float32[2, 3] = add(%2, %10) {}\n"
      "  return %7, %9, %11\n"
      "}\n";
  // 90000 elements is above the default limit; with a limit of 4 only neg(c4) folds.
  EXPECT_EQ(run_passes("canonicalize{fold-max-elements=4},dce", ir),
            "graph g {\n"
            "  input %0 \"y\": float32[300, 300]\n"
            "  input %1 \"z\": float32[2, 2]\n"
            "  input %2 \"w\": float32[2, 3]\n"
            "  const %3 \"two\": float32[1] = [2]\n"
            "  const %4 \"c4\": float32[2, 2] = [1, 2, 3, 4]\n"
            "  const %5 \"c6\": float32[2, 3] = [1, 2, 3, 4, 5, 6]\n"
            "  const %12 \"folded_0\": float32[2, 2] = [-1, -2, -3, -4]\n"
            "  %6: float32[300, 300] = expand(%3) {shape=[300, 300]}\n"
            "  %7: float32[300, 300] = mul(%0, %6) {}\n"
            "  %9: float32[2, 2] = add(%1, %12) {}\n"
            "  %10: float32[2, 3] = neg(%5) {}\n"
            "  %11: float32[2, 3] = add(%2, %10) {}\n"
            "  return %7, %9, %11\n"
            "}\n");
  std::string folded = run_passes("canonicalize,dce", ir);
  EXPECT_NE(folded.find("expand(%3) {shape=[300, 300]}"), std::string::npos) << folded;
  EXPECT_NE(folded.find("\"folded_1\": float32[2, 3] = [-1, -2, -3, -4, -5, -6]"),
            std::string::npos)
      << folded;
  expect_same_results("canonicalize{fold-max-elements=4},dce", ir, 1);
}

const char* kStridedConstant =
    "graph g {\n"
    "  input %0 \"x\": float32[2, 3]\n"
    "  const %1 \"m\": float32[2, 2] = [1, 2, 3, 4]\n"
    "  %2: float32[2, 2] = permute(%1) {dims=[1, 0]}\n"
    "  %3: float32[2, 3] = as_strided(%2) {sizes=[2, 3], strides=[0, 1], offset=0}\n"
    "  %4: float32[2, 3] = add(%0, %3) {}\n"
    "  %5: float32[2, 2] = exp(%2) {}\n"
    "  %6: float32[2, 2] = mul(%5, %5) {}\n"
    "  return %4, %6\n"
    "}\n";

TEST(PassCanonicalize, FoldingKeepsTheLayoutAViewReads) {
  // as_strided reads the storage of the permuted constant: [1, 2, 3] twice. A contiguous
  // constant of the permute would read [1, 3, 2], so with the as_strided above the limit
  // the permute stays; exp(permute) still folds, evaluated with eager's layout.
  EXPECT_EQ(run_passes("canonicalize{fold-max-elements=5},dce", kStridedConstant),
            "graph g {\n"
            "  input %0 \"x\": float32[2, 3]\n"
            "  const %1 \"m\": float32[2, 2] = [1, 2, 3, 4]\n"
            "  %2: float32[2, 2] = permute(%1) {dims=[1, 0]}\n"
            "  %3: float32[2, 3] = as_strided(%2) {sizes=[2, 3], strides=[0, 1], offset=0}\n"
            "  %4: float32[2, 3] = add(%0, %3) {}\n"
            "  %5: float32[2, 2] = exp(%2) {}\n"
            "  %6: float32[2, 2] = mul(%5, %5) {}\n"
            "  return %4, %6\n"
            "}\n");
  expect_same_results("canonicalize{fold-max-elements=5},dce", kStridedConstant, 1);
  // Under the default limit the as_strided folds too, from the permute's real layout.
  EXPECT_NE(run_passes("canonicalize,dce", kStridedConstant)
                .find("\"folded_0\": float32[2, 3] = [1, 2, 3, 1, 2, 3]"),
            std::string::npos);
  expect_same_results("canonicalize,dce", kStridedConstant, 1);
}

TEST(PassCanonicalize, FrozenParametersWithDataCountAsConstants) {
  std::unique_ptr<ir::Graph> g = testing::parse(
      "graph g {\n"
      "  input %0 \"x\": float32[2]\n"
      "  param %1 \"scale\": float32[2]\n"
      "  param %2 \"bias\": float32[2]\n"
      "  %3: float32[2] = relu(%0) {}\n"
      "  %4: float32[2] = mul(%3, %1) {}\n"
      "  %5: float32[2] = neg(%2) {}\n"
      "  %6: float32[2] = add(%4, %5) {}\n"
      "  return %6\n"
      "}\n");
  g->mutable_inputs()[1].constant = Tensor::from_vector<float>({1, 1});
  g->mutable_inputs()[2].constant = Tensor::from_vector<float>({0.5f, -2});
  std::string before = ir::print_graph(*g);
  PipelineOptions options;
  options.verify_each = true;
  PassManager("canonicalize", options).run(*g);
  EXPECT_EQ(ir::print_graph(*g), before);  // parameters are read from the module each call
  options.context.parameters_frozen = true;
  PassManager("canonicalize,dce", options).run(*g);
  EXPECT_EQ(ir::print_graph(*g),
            "graph g {\n"
            "  input %0 \"x\": float32[2]\n"
            "  param %1 \"scale\": float32[2]\n"
            "  param %2 \"bias\": float32[2]\n"
            "  const %7 \"folded_0\": float32[2] = [-0.5, 2]\n"
            "  %3: float32[2] = relu(%0) {}\n"
            "  %6: float32[2] = add(%3, %7) {}\n"
            "  return %6\n"
            "}\n");
}

TEST(PassCanonicalize, MergesEverythingWithDceAndCseOnABiggerGraph) {
  // x [s0, 4]: identities, chains and folds together, checked against the interpreter.
  const char* ir =
      "graph g {\n"
      "  input %0 \"x\": float32[s0, 4]\n"
      "  param %1 \"w\": float32[4, 4]\n"
      "  const %2 \"one\": float32[4] = [1, 1, 1, 1]\n"
      "  const %3 \"b\": float32[4] = [0.25, -1, 3, 0]\n"
      "  %4: float32[s0, 4] = matmul(%0, %1) {}\n"
      "  %5: float32[s0, 4] = mul(%4, %2) {}\n"
      "  %6: float32[4] = mul(%3, %3) {}\n"
      "  %7: float32[s0, 4] = add(%5, %6) {}\n"
      "  %8: float32[4, s0] = permute(%7) {dims=[1, 0]}\n"
      "  %9: float32[s0, 4] = permute(%8) {dims=[1, 0]}\n"
      "  %10: float32[s0, 1, 4] = unsqueeze(%9) {dim=1}\n"
      "  %11: float32[s0, 4] = view(%10) {shape=[s0, 4]}\n"
      "  %12: float32[s0, 4] = tanh(%11) {}\n"
      "  %13: float32[s0, 4] = tanh(%7) {}\n"
      "  %14: float32[s0, 4] = sub(%12, %13) {}\n"
      "  %15: float32[s0, 4] = cast(%14) {dtype=float32}\n"
      "  %16: float32[s0] = sum(%15) {dims=[1], keepdim=false}\n"
      "  return %16, %13\n"
      "}\n";
  EXPECT_EQ(run_passes("canonicalize,dce,cse", ir),
            "graph g {\n"
            "  input %0 \"x\": float32[s0, 4]\n"
            "  param %1 \"w\": float32[4, 4]\n"
            "  const %2 \"one\": float32[4] = [1, 1, 1, 1]\n"
            "  const %3 \"b\": float32[4] = [0.25, -1, 3, 0]\n"
            "  const %17 \"folded_0\": float32[4] = [0.0625, 1, 9, 0]\n"
            "  %4: float32[s0, 4] = matmul(%0, %1) {}\n"
            "  %7: float32[s0, 4] = add(%4, %17) {}\n"
            "  %12: float32[s0, 4] = tanh(%7) {}\n"
            "  %14: float32[s0, 4] = sub(%12, %12) {}\n"
            "  %16: float32[s0] = sum(%14) {dims=[1], keepdim=false}\n"
            "  return %16, %12\n"
            "}\n");
  expect_same_results("canonicalize,dce,cse", ir);
}

TEST(PassCanonicalize, ReportsRewritesAndFolds) {
  std::unique_ptr<ir::Graph> g = testing::parse(kFoldable);
  PassReport report = PassManager("canonicalize").run(*g);
  EXPECT_TRUE(report.passes[0].changed);
  EXPECT_EQ(report.passes[0].summary, "0 rewrites, 2 folded constants");
  report = PassManager("canonicalize").run(*g);
  EXPECT_FALSE(report.passes[0].changed);
}

TEST(PassCanonicalize, RejectsUnknownOrInvalidOptions) {
  expect_error([] { PassManager("canonicalize{fold=1}"); },
               {"[passes] pass 'canonicalize' has no option 'fold'",
                "it knows: max-iterations, fold-max-elements"});
  expect_error([] { PassManager("canonicalize{max-iterations=0}"); },
               {"[canonicalize] expected max-iterations >= 1 and fold-max-elements >= 0, found 0 "
                "and 65536"});
  expect_error([] { PassManager("canonicalize{fold-max-elements=many}"); },
               {"option 'fold-max-elements' of pass 'canonicalize' expected an integer, found "
                "'many'"});
}

}  // namespace
}  // namespace kiln::passes
