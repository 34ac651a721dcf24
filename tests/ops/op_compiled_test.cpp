// Every OpCase traced and compiled: the graph of one op call, run by the reference
// executor, equals the eager call bit for bit; run by the compiled CPU backend (passes,
// generated kernels for the elementwise ops, the planned executor), it matches within the
// case's tolerance. Random ops (fresh draws) and calls that read values on the host (a
// graph break) are left to the frontend's compile tests.
#include <gtest/gtest.h>

#include "frontend/compare_bits.h"
#include "harness.h"
#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/interp/interp.h"
#include "kiln/kiln.h"

namespace kiln::testing {
namespace {

// The module a single op call is traced in.
struct OneOp : nn::Module {};

class OpCompiled : public ::testing::TestWithParam<size_t> {};

TEST_P(OpCompiled, InterpIsEagerAndCompiledMatches) {
  const OpCase& c = registry()[GetParam()];
  const OpDef* op = find_op(c.op);
  ASSERT_NE(op, nullptr);
  if (op->random)
    GTEST_SKIP() << "draws differ per call (tests/frontend/compile_random_graph_test.cpp)";
  NoGradGuard no_grad;
  OneOp module;
  uint64_t seed = 5000;
  int compiled_runs = 0;
  for (DType dtype : c.dtypes) {
    // The first run of each dtype: one graph, one kernel module each.
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.runs[0].size(); ++i)
      inputs.push_back(make_input(c.runs[0][i], dtype, false, ++seed));
    Tensor want = c.fn(inputs);
    std::unique_ptr<ir::Graph> graph;
    try {
      graph = detail::trace_module(module, inputs, [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{c.fn(in)};
      });
    } catch (const GraphBreakError&) {
      continue;  // reads a value on the host: segments, covered by the compile tests
    }
    std::string where = c.op + "/" + c.label + " dtype=" + std::string(dtype_name(dtype));
    std::vector<Tensor> args;
    size_t next = 0;
    for (const ir::GraphInput& in : graph->inputs())
      args.push_back(in.kind == ir::InputKind::Input ? inputs.at(next++) : Tensor());
    std::shared_ptr<const ir::Graph> shared(std::move(graph));
    std::vector<Tensor> reference = interp::Executable(shared).run(args);
    ASSERT_EQ(reference.size(), 1u) << where;
    EXPECT_TRUE(same_bits(reference[0], want)) << where << " (interp)";
    cpu::compiler::CompilerOptions options;
    options.verify_passes = true;
    cpu::compiler::CompiledGraph compiled(*shared, options);
    std::vector<Tensor> got = compiled.run(args);
    ASSERT_EQ(got.size(), 1u) << where;
    double tol = !is_floating(want.dtype()) ? 0 : dtype == kFloat64 ? c.f64_tol : c.f32_tol;
    EXPECT_TRUE(close_to(got[0], want, tol, tol)) << where << " (cpu): " << compiled.stats().str();
    ++compiled_runs;
  }
  if (compiled_runs == 0) GTEST_SKIP() << "every call reads a value on the host";
}

std::string case_param_name(const ::testing::TestParamInfo<size_t>& info) {
  const OpCase& c = registry()[info.param];
  std::string n = c.op + "_" + c.label;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

std::vector<size_t> case_indices() {
  std::vector<size_t> idx(registry().size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Table, OpCompiled, ::testing::ValuesIn(case_indices()), case_param_name);

}  // namespace
}  // namespace kiln::testing
