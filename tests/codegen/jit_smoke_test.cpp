// Tests the MLIR/LLVM toolchain smoke test: JIT-compiled axpy against a plain C++ loop, and
// MLIR diagnostics surfacing as kiln::Error.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/cpu/codegen/smoke.h"
#include "kiln/error.h"

namespace kiln::cpu::codegen {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

// Runs the smoke test with `options` and returns the kiln::Error message ("" if none).
std::string smoke_error(const SmokeOptions& options) {
  std::vector<float> x = {1, 2, 3};
  std::vector<float> y = {4, 5, 6};
  try {
    run_jit_smoke(2.0f, x, y, options);
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

TEST(CodegenJitSmoke, AxpyMatchesCppLoopBitExactly) {
  // 1003: not a multiple of any vector width, so the vectorized loop's remainder runs too.
  const size_t n = 1003;
  const float a = 1.7f;
  std::vector<float> x = random_floats(n, 1);
  std::vector<float> y = random_floats(n, 2);
  std::vector<float> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = a * x[i] + y[i];

  SmokeOptions options;
  options.keep_ir = true;
  SmokeResult r = run_jit_smoke(a, x, y, options);

  ASSERT_EQ(r.y.size(), n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(r.y[i]), std::bit_cast<uint32_t>(expected[i]))
        << "i=" << i << " jit=" << r.y[i] << " ref=" << expected[i];
  EXPECT_GT(r.timings.context_ms, 0.0);
  EXPECT_GT(r.timings.build_ms, 0.0);
  EXPECT_GT(r.timings.lower_ms, 0.0);
  EXPECT_GT(r.timings.jit_ms, 0.0);
  EXPECT_GE(r.timings.run_ms, 0.0);
  EXPECT_NE(r.input_ir.find("scf.for"), std::string::npos) << r.input_ir;
  EXPECT_NE(r.input_ir.find("llvm.emit_c_interface"), std::string::npos) << r.input_ir;
  EXPECT_NE(r.lowered_ir.find("llvm.func @_mlir_ciface_axpy"), std::string::npos) << r.lowered_ir;
  EXPECT_EQ(r.lowered_ir.find("scf.for"), std::string::npos) << r.lowered_ir;
  RecordProperty("jit_ms", std::to_string(r.timings.jit_ms));
}

TEST(CodegenJitSmoke, RunsTwiceAndOnEmptyInput) {
  // Global LLVM/MLIR setup must tolerate a second compile in the same process.
  SmokeResult first = run_jit_smoke(-0.5f, std::vector<float>{2, 4}, std::vector<float>{1, 1});
  EXPECT_EQ(first.y, (std::vector<float>{0, -1}));
  SmokeResult empty = run_jit_smoke(3.0f, std::vector<float>{}, std::vector<float>{});
  EXPECT_TRUE(empty.y.empty());
}

TEST(CodegenJitSmoke, KeepsIrOnlyWhenAsked) {
  SmokeResult r = run_jit_smoke(1.0f, std::vector<float>{1}, std::vector<float>{1});
  EXPECT_EQ(r.y, (std::vector<float>{2}));
  EXPECT_TRUE(r.input_ir.empty());
  EXPECT_TRUE(r.lowered_ir.empty());
}

TEST(CodegenJitSmoke, MismatchedSizesThrow) {
  try {
    run_jit_smoke(1.0f, std::vector<float>{1, 2, 3}, std::vector<float>{1, 2});
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected x and y of the same size, got 3 and 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(CodegenJitSmoke, UnknownPassReportsTheParserError) {
  SmokeOptions options;
  options.pipeline = "builtin.module(canonicalize, no-such-pass)";
  std::string msg = smoke_error(options);
  EXPECT_NE(msg.find("expected a valid MLIR pass pipeline"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'no-such-pass' does not refer to a registered pass"), std::string::npos)
      << msg;
}

TEST(CodegenJitSmoke, UnanchoredPipelineIsRejected) {
  SmokeOptions options;
  options.pipeline = "canonicalize";
  std::string msg = smoke_error(options);
  EXPECT_NE(msg.find("expected pass pipeline to be wrapped with the anchor operation type"),
            std::string::npos)
      << msg;
}

TEST(CodegenJitSmoke, WrongAnchorReportsTheMlirDiagnostic) {
  SmokeOptions options;
  options.pipeline = "func.func(canonicalize)";
  std::string msg = smoke_error(options);
  EXPECT_NE(msg.find("got MLIR errors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("can't run 'func.func' pass manager on 'builtin.module' op"),
            std::string::npos)
      << msg;
}

TEST(CodegenJitSmoke, IncompleteLoweringReportsTheMlirDiagnostic) {
  // Without convert-scf-to-cf the scf.for survives with casts around it that LLVM IR
  // translation rejects: MLIR's diagnostic (with its location) must reach the kiln::Error.
  SmokeOptions options;
  options.pipeline =
      "builtin.module(convert-arith-to-llvm, finalize-memref-to-llvm, convert-func-to-llvm, "
      "reconcile-unrealized-casts)";
  std::string msg = smoke_error(options);
  EXPECT_NE(msg.find("expected the lowered module to translate to LLVM IR"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("loc(\"kiln.codegen.smoke.axpy\"): error: LLVM Translation failed for "
                     "operation: builtin.unrealized_conversion_cast"),
            std::string::npos)
      << msg;
}

TEST(CodegenJitSmoke, UntranslatableModuleReportsTheMlirDiagnostic) {
  // A pipeline that lowers nothing leaves func/scf/memref ops LLVM IR translation rejects.
  SmokeOptions options;
  options.pipeline = "builtin.module(canonicalize)";
  std::string msg = smoke_error(options);
  EXPECT_NE(msg.find("missing `LLVMTranslationDialectInterface` registration for dialect for "
                     "op: func.func"),
            std::string::npos)
      << msg;
  // The op is named, not dumped: errors stay short.
  EXPECT_EQ(msg.find("see current operation"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::cpu::codegen
