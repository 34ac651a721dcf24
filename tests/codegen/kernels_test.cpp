// Fused elementwise kernels generated through MLIR and JIT-compiled: the iteration spaces
// exec::fused_kernel_spec() derives; kernels checked against the reference executor (chains,
// broadcasting, several outputs, every dtype, dynamic dims, split ranges, large outputs through
// the streaming-store loop, every elementwise op); the accuracy of the vectorizable math; the
// errors; and, printed rather than asserted, compile time and speed.
#include "kiln/cpu/codegen/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "codegen/five_op_kernel.h"
#include "codegen/op_cases.h"
#include "kiln/cpu/kernels/register.h"
#include "kiln/dispatch.h"
#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused.h"
#include "test_util.h"

namespace kiln::cpu::codegen {
namespace {

using ir::Graph;
using ir::InputKind;
using ir::Value;
using testing::build_case;
using testing::Case;
using testing::ElementwiseOpCases;
using testing::every_elementwise_op_case;
using testing::make_tensor;
using testing::OpCase;
using testing::parse_case;
using testing::runtime_dims;
using testing::Tolerance;
using testing::type;

// The reference executor runs the eager kernels: fill the op table's CPU slots first.
class RegisterCpuKernels : public ::testing::Environment {
 public:
  void SetUp() override { cpu::kernels::register_kernels(); }
};
::testing::Environment* const register_cpu_kernels =
    ::testing::AddGlobalTestEnvironment(new RegisterCpuKernels);

// ---- data (fusion groups: op_cases.h) ----

// Deterministic values in a range that suits every dtype.
Tensor pattern(DType dtype, IntList sizes, int salt = 0) {
  std::vector<double> v(static_cast<size_t>(numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i) {
    int k = static_cast<int>((i * 7 + static_cast<size_t>(salt) * 13) % 23) - 11;
    v[i] = dtype == DType::Bool ? (k % 3 == 0) : is_floating(dtype) ? k * 0.37 + 0.1 * salt : k;
  }
  return make_tensor(dtype, sizes, v);
}

// ---- running ----

// Runs a compiled kernel of `fused` on dense `inputs` (one per operand) into fresh outputs of
// `out_sizes`; with `split` >= 0, as two calls [0, split) and [split, end).
std::vector<Tensor> run_kernel(exec::FusedKernelFn fn, const ir::Node& fused,
                               const std::vector<Tensor>& inputs, IntList out_sizes,
                               int64_t split = -1) {
  std::vector<Tensor> outputs;
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) {
    EXPECT_TRUE(t.is_contiguous());
    buffers.push_back(t.raw_data());
  }
  for (const Value* v : fused.outputs) {
    outputs.push_back(Tensor::empty(out_sizes, v->type.dtype));
    buffers.push_back(outputs.back().raw_data());
  }
  std::vector<int64_t> dims = runtime_dims(fused, out_sizes);
  if (split < 0) {
    fn(buffers.data(), dims.data(), 0, dims[0]);
  } else {
    fn(buffers.data(), dims.data(), 0, split);
    fn(buffers.data(), dims.data(), split, dims[0]);
  }
  return outputs;
}

std::vector<Tensor> reference(const Case& c, const std::vector<Tensor>& inputs) {
  return interp::Executable(c.graph).run(inputs);
}

void expect_close(const Tensor& got, const Tensor& want, Tolerance tol, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(Shape(got.sizes()), Shape(want.sizes())) << what;
  int reported = 0;
  auto report = [&](size_t i, const std::string& g, const std::string& w) {
    if (reported++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << g << ", want " << w;
  };
  if (is_floating(want.dtype())) {
    std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      bool ok;
      if (std::isnan(w[i]) || std::isnan(g[i]))
        ok = std::isnan(w[i]) && std::isnan(g[i]);
      else if (std::isinf(w[i]) || (tol.rtol == 0 && tol.atol == 0))
        ok = g[i] == w[i] && std::signbit(g[i]) == std::signbit(w[i]);
      else
        ok = std::abs(g[i] - w[i]) <= tol.atol + tol.rtol * std::abs(w[i]);
      if (!ok) report(i, std::to_string(g[i]), std::to_string(w[i]));
    }
  } else {
    std::vector<int64_t> g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] != w[i]) report(i, std::to_string(g[i]), std::to_string(w[i]));
  }
  if (reported > 5) ADD_FAILURE() << what << ": " << reported << " mismatches in all";
}

// Compiles the case's group, runs it and compares every output with the reference executor.
void check_case(const Case& c, const std::vector<Tensor>& inputs, Tolerance tol = {},
                int64_t split = -1) {
  std::vector<Tensor> want = reference(c, inputs);
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1});
  std::vector<Tensor> got =
      run_kernel(module->lookup("fused_0"), *c.fused, inputs, want[0].sizes(), split);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    expect_close(got[k], want[k], tol, "output " + std::to_string(k));
}

// ---- exec::fused_kernel_spec ----

TEST(CodegenKernels, SpecMergesDimsThatBroadcastAlike) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[2, 3, 4]
  input %1 "b": float32[4]
  %2: float32[2, 3, 4] = fused(%0, %1) {kind="elementwise"} {
    region (%3: float32[2, 3, 4], %4: float32[4]) {
      %5: float32[2, 3, 4] = add(%3, %4) {}
      yield %5
    }
  }
  return %2
})");
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "k");
  EXPECT_EQ(spec.name, "k");
  EXPECT_EQ(spec.region, c.fused->regions[0].get());
  EXPECT_EQ(spec.dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(spec.broadcast, (std::vector<std::vector<bool>>{{false, false}, {true, false}}));
  EXPECT_EQ(exec::fused_dim_groups(*c.fused), (std::vector<std::vector<int>>{{0, 1}, {2}}));
}

TEST(CodegenKernels, SpecDropsSizeOneDimsAndKeepsMiddleBroadcasts) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[2, 1, 3, 5]
  input %1 "y": float32[2, 1, 1, 5]
  input %2 "c": float32[]
  %3: float32[2, 1, 3, 5] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%4: float32[2, 1, 3, 5], %5: float32[2, 1, 1, 5], %6: float32[]) {
      %7: float32[2, 1, 3, 5] = mul(%4, %5) {}
      %8: float32[2, 1, 3, 5] = add(%7, %6) {}
      yield %8
    }
  }
  return %3
})");
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "k");
  EXPECT_EQ(spec.dims, (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(spec.broadcast, (std::vector<std::vector<bool>>{
                                {false, false, false}, {false, true, false}, {true, true, true}}));
  EXPECT_EQ(exec::fused_dim_groups(*c.fused), (std::vector<std::vector<int>>{{0}, {2}, {3}}));
}

TEST(CodegenKernels, SpecOfOneElementIsOneDimOfSizeOne) {
  for (const char* shape : {"[]", "[1, 1]"}) {
    std::string t = std::string("float32") + shape;
    Case c = parse_case("graph g {\n  input %0 \"x\": " + t + "\n  %1: " + t +
                        " = fused(%0) {kind=\"elementwise\"} {\n    region (%2: " + t +
                        ") {\n      %3: " + t + " = relu(%2) {}\n      yield %3\n    }\n  }\n" +
                        "  return %1\n}");
    exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "k");
    EXPECT_EQ(spec.dims, (std::vector<int64_t>{1})) << shape;
    EXPECT_EQ(spec.broadcast, (std::vector<std::vector<bool>>{{false}})) << shape;
    EXPECT_EQ(exec::fused_dim_groups(*c.fused), (std::vector<std::vector<int>>{{}})) << shape;
  }
}

TEST(CodegenKernels, SpecSymbolicDimsAreRuntimeDims) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[s0, 3, 8]
  input %1 "b": float32[8]
  input %2 "y": float32[s0, 3, 8]
  %3: float32[s0, 3, 8] = fused(%0, %1) {kind="elementwise"} {
    region (%4: float32[s0, 3, 8], %5: float32[8]) {
      %6: float32[s0, 3, 8] = add(%4, %5) {}
      yield %6
    }
  }
  %7: float32[s0, 3, 8] = fused(%0, %2) {kind="elementwise"} {
    region (%8: float32[s0, 3, 8], %9: float32[s0, 3, 8]) {
      %10: float32[s0, 3, 8] = sub(%8, %9) {}
      yield %10
    }
  }
  return %3, %7
})");
  EXPECT_EQ(exec::fused_kernel_spec(*c.graph->nodes()[0], "k").dims, (std::vector<int64_t>{-1, 8}));
  EXPECT_EQ(exec::fused_kernel_spec(*c.graph->nodes()[1], "k").dims, (std::vector<int64_t>{-1}));
  EXPECT_EQ(exec::fused_dim_groups(*c.graph->nodes()[1]),
            (std::vector<std::vector<int>>{{0, 1, 2}}));
}

TEST(CodegenKernels, SpecRejectsOutputsOfDifferentShapes) {
  Case c = build_case({type(DType::Float32, {2, 3})},
                      {type(DType::Float32, {2, 3}), type(DType::Float32, {3})},
                      [](Graph& r, std::vector<Value*> a) {
                        return std::vector<Value*>{a[0], a[0]};
                      });
  expect_error([&] { exec::fused_kernel_spec(*c.fused, "k"); },
               {"[codegen] expected every output of fused node", "to have one shape",
                "found float32[2, 3] for output 0 and float32[3] for output 1",
                "Fix: fuse only ops whose results share a shape"});
  expect_error([&] { exec::fused_dim_groups(*c.fused); }, {"to have one shape"});
}

TEST(CodegenKernels, SpecRejectsOperandsThatDoNotBroadcast) {
  Case c = build_case({type(DType::Float32, {4, 3})}, {type(DType::Float32, {3})},
                      [](Graph& r, std::vector<Value*> a) { return std::vector<Value*>{a[0]}; });
  expect_error([&] { exec::fused_kernel_spec(*c.fused, "k"); },
               {"expected operand 0 of fused node",
                "(float32[4, 3]) to broadcast to the iteration shape [3], found dim 0 of size 4",
                "Fix: a fusion group's inputs must broadcast to its iteration shape"});
}

TEST(CodegenKernels, SpecRejectsGroupsWithoutResultsOrWithAbsentOperands) {
  Case none = build_case({type(DType::Float32, {3})}, {},
                         [](Graph&, std::vector<Value*>) { return std::vector<Value*>{}; });
  expect_error([&] { exec::fused_kernel_spec(*none.fused, "k"); },
               {"to have at least one output, found none"});
  Case absent = build_case({type(DType::Float32, {3})}, {type(DType::Float32, {3})},
                           [](Graph&, std::vector<Value*> a) { return std::vector<Value*>{a[0]}; });
  const_cast<ir::Node*>(absent.fused)->inputs[0] = nullptr;
  expect_error([&] { exec::fused_kernel_spec(*absent.fused, "k"); },
               {"expected operand 0 of fused node", "found an absent operand"});
}

// ---- kernels against the reference executor ----

TEST(CodegenKernels, ChainWithBroadcastsMatchesReferenceBitExactly) {
  // relu(x * a + b) * c - d: a bias row, a column, a scalar and a full tensor; 37 columns so
  // the vector loop's remainder runs too.
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[4, 37]
  input %1 "a": float32[37]
  input %2 "b": float32[4, 1]
  input %3 "c": float32[]
  input %4 "d": float32[4, 37]
  %5: float32[4, 37] = fused(%0, %1, %2, %3, %4) {kind="elementwise"} {
    region (%6: float32[4, 37], %7: float32[37], %8: float32[4, 1], %9: float32[], %10: float32[4, 37]) {
      %11: float32[4, 37] = mul(%6, %7) {}
      %12: float32[4, 37] = add(%11, %8) {}
      %13: float32[4, 37] = relu(%12) {}
      %14: float32[4, 37] = mul(%13, %9) {}
      %15: float32[4, 37] = sub(%14, %10) {}
      yield %15
    }
  }
  return %5
})");
  check_case(c, {pattern(DType::Float32, {4, 37}, 1), pattern(DType::Float32, {37}, 2),
                 pattern(DType::Float32, {4, 1}, 3), make_tensor(DType::Float32, {}, {1.5}),
                 pattern(DType::Float32, {4, 37}, 4)});
}

TEST(CodegenKernels, MiddleBroadcastOfRankThree) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[2, 3, 5]
  input %1 "y": float32[2, 1, 5]
  input %2 "z": float32[3, 1]
  %3: float32[2, 3, 5] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%4: float32[2, 3, 5], %5: float32[2, 1, 5], %6: float32[3, 1]) {
      %7: float32[2, 3, 5] = mul(%4, %5) {}
      %8: float32[2, 3, 5] = add(%7, %6) {}
      yield %8
    }
  }
  return %3
})");
  check_case(c, {pattern(DType::Float32, {2, 3, 5}, 1), pattern(DType::Float32, {2, 1, 5}, 2),
                 pattern(DType::Float32, {3, 1}, 3)});
}

TEST(CodegenKernels, SeveralOutputsBoolOutputsWhereAndPassThrough) {
  // m = x > 0 (a bool output), y = where(m, x, -x) * 2, and x itself as a result.
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[3, 10]
  input %1 "two": float32[]
  input %2 "zero": float32[]
  %3, %4, %5: float32[3, 10], bool[3, 10], float32[3, 10] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%6: float32[3, 10], %7: float32[], %8: float32[]) {
      %9: bool[3, 10] = gt(%6, %8) {}
      %10: float32[3, 10] = neg(%6) {}
      %11: float32[3, 10] = where(%9, %6, %10) {}
      %12: float32[3, 10] = mul(%11, %7) {}
      yield %12, %9, %6
    }
  }
  return %3, %4, %5
})");
  check_case(c, {pattern(DType::Float32, {3, 10}), make_tensor(DType::Float32, {}, {2}),
                 make_tensor(DType::Float32, {}, {0})});
}

TEST(CodegenKernels, BoolInputsAndLogic) {
  Case c = parse_case(R"(graph g {
  input %0 "p": bool[16]
  input %1 "q": bool[16]
  input %2 "x": int32[16]
  %3, %4: bool[16], int32[16] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%5: bool[16], %6: bool[16], %7: int32[16]) {
      %8: bool[16] = logical_and(%5, %6) {}
      %9: bool[16] = logical_not(%8) {}
      %10: bool[16] = logical_or(%9, %6) {}
      %11: int32[16] = neg(%7) {}
      %12: int32[16] = where(%10, %7, %11) {}
      yield %10, %12
    }
  }
  return %3, %4
})");
  check_case(c, {pattern(DType::Bool, {16}, 1), pattern(DType::Bool, {16}, 2),
                 pattern(DType::Int32, {16}, 3)});
}

TEST(CodegenKernels, Int64ArithmeticWrapsAsEager) {
  Case c = parse_case(R"(graph g {
  input %0 "a": int64[6]
  input %1 "b": int64[6]
  %2: int64[6] = fused(%0, %1) {kind="elementwise"} {
    region (%3: int64[6], %4: int64[6]) {
      %5: int64[6] = mul(%3, %4) {}
      %6: int64[6] = add(%5, %3) {}
      %7: int64[6] = maximum(%3, %4) {}
      %8: int64[6] = sub(%6, %7) {}
      %9: int64[6] = abs(%8) {}
      yield %9
    }
  }
  return %2
})");
  const double big = std::ldexp(1.0, 62);
  check_case(c, {make_tensor(DType::Int64, {6}, {big, -big, 3, -7, 0, -std::ldexp(1.0, 63)}),
                 make_tensor(DType::Int64, {6}, {4, 3, -5, -7, 12, 1})});
}

TEST(CodegenKernels, Float64UsesLibmWhereNoApproximationApplies) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float64[50]
  %1, %2, %3, %4: float64[50], float64[50], float64[50], float64[50] = fused(%0) {kind="elementwise"} {
    region (%5: float64[50]) {
      %6: float64[50] = tanh(%5) {}
      %7: float64[50] = erf(%5) {}
      %8: float64[50] = abs(%5) {}
      %9: float64[50] = log1p(%8) {}
      %10: float64[50] = exp(%5) {}
      yield %6, %7, %9, %10
    }
  }
  return %1, %2, %3, %4
})");
  check_case(c, {pattern(DType::Float64, {50})}, {1e-14, 1e-300});
}

TEST(CodegenKernels, RankZeroGroup) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[]
  input %1 "y": float32[]
  %2: float32[] = fused(%0, %1) {kind="elementwise"} {
    region (%3: float32[], %4: float32[]) {
      %5: float32[] = sub(%3, %4) {}
      %6: float32[] = square(%5) {}
      yield %6
    }
  }
  return %2
})");
  check_case(c, {make_tensor(DType::Float32, {}, {2.5}), make_tensor(DType::Float32, {}, {-1})});
}

TEST(CodegenKernels, DynamicDimsComeAtRunTime) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[s0, s1]
  input %1 "b": float32[s1]
  input %2 "c": float32[s0, 1]
  %3: float32[s0, s1] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%4: float32[s0, s1], %5: float32[s1], %6: float32[s0, 1]) {
      %7: float32[s0, s1] = add(%4, %5) {}
      %8: float32[s0, s1] = mul(%7, %6) {}
      yield %8
    }
  }
  return %3
})");
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  EXPECT_EQ(spec.dims, (std::vector<int64_t>{-1, -1}));
  // One compiled kernel serves every size.
  std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1});
  for (int64_t rows : {1, 5}) {
    for (int64_t cols : {1, 3, 33}) {
      std::vector<Tensor> inputs = {pattern(DType::Float32, {rows, cols}, 1),
                                    pattern(DType::Float32, {cols}, 2),
                                    pattern(DType::Float32, {rows, 1}, 3)};
      std::vector<Tensor> want = reference(c, inputs);
      std::vector<Tensor> got =
          run_kernel(module->lookup("fused_0"), *c.fused, inputs, {rows, cols});
      expect_close(got[0], want[0], {}, std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

TEST(CodegenKernels, SplitRangeGivesTheSameResult) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[10, 7]
  input %1 "b": float32[7]
  %2: float32[10, 7] = fused(%0, %1) {kind="elementwise"} {
    region (%3: float32[10, 7], %4: float32[7]) {
      %5: float32[10, 7] = add(%3, %4) {}
      %6: float32[10, 7] = tanh(%5) {}
      yield %6
    }
  }
  return %2
})");
  std::vector<Tensor> inputs = {pattern(DType::Float32, {10, 7}), pattern(DType::Float32, {7})};
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1});
  exec::FusedKernelFn fn = module->lookup("fused_0");
  Tensor whole = run_kernel(fn, *c.fused, inputs, {10, 7})[0];
  for (int64_t split : {0, 3, 10})
    expect_close(run_kernel(fn, *c.fused, inputs, {10, 7}, split)[0], whole, {},
                 "split at " + std::to_string(split));
  expect_close(whole, reference(c, inputs)[0], {1e-5, 1e-6}, "against the reference");
}

// Kernels get streaming stores on x86 hosts only (they need its store fence).
#if defined(__x86_64__) || defined(__i386__)
constexpr bool kStreamingHost = true;
#else
constexpr bool kStreamingHost = false;
#endif

// Runs `fn` over [0, split) and [split, dims[0]) into fresh outputs placed `shift` elements
// past a 64-byte boundary: 0 as kiln's allocator places buffers (where large outputs are
// written with streaming stores), 1 where they are not line-aligned (the normal loop).
std::vector<Tensor> run_shifted(exec::FusedKernelFn fn, const ir::Node& fused,
                                const std::vector<Tensor>& inputs, IntList out_sizes, int64_t shift,
                                int64_t split) {
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) buffers.push_back(t.raw_data());
  std::vector<Tensor> outputs;
  for (const Value* v : fused.outputs) {
    Tensor block = Tensor::empty({numel(out_sizes) + 8}, DType::Float64);  // 64-byte aligned
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.raw_data()) % 64, 0u);
    char* data = static_cast<char*>(block.raw_data()) + shift * itemsize(v->type.dtype);
    outputs.push_back(Tensor::from_blob(data, out_sizes, v->type.dtype, {}, [block](void*) {}));
    buffers.push_back(data);
  }
  std::vector<int64_t> dims = runtime_dims(fused, out_sizes);
  fn(buffers.data(), dims.data(), 0, split);
  fn(buffers.data(), dims.data(), split, dims[0]);
  return outputs;
}

TEST(CodegenKernels, LargeOutputsStreamWithTheSameResults) {
  // 17 bytes of output per element over [1001, 1003]: 17 MB, above the 16 MiB from which
  // kernels write with streaming stores. Outputs of four dtypes (float64 tanh calls libm lane
  // by lane), inputs broadcast along either dim, and 1003 columns, so every row has scalar
  // elements around its aligned vectors.
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[s0, s1]
  input %1 "b": float32[s1]
  input %2 "c": float32[s0, 1]
  input %3 "p": bool[s0, s1]
  input %4 "k": int32[s0, s1]
  %5, %6, %7, %8: float32[s0, s1], bool[s0, s1], float64[s0, s1], int32[s0, s1] = fused(%0, %1, %2, %3, %4) {kind="elementwise"} {
    region (%9: float32[s0, s1], %10: float32[s1], %11: float32[s0, 1], %12: bool[s0, s1], %13: int32[s0, s1]) {
      %14: float32[s0, s1] = add(%9, %10) {}
      %15: float32[s0, s1] = mul(%14, %11) {}
      %16: float32[s0, s1] = tanh(%15) {}
      %17: float32[s0, s1] = neg(%15) {}
      %18: float32[s0, s1] = where(%12, %16, %17) {}
      %19: bool[s0, s1] = gt(%9, %10) {}
      %20: float64[s0, s1] = cast(%15) {dtype=float64}
      %21: float64[s0, s1] = tanh(%20) {}
      %22: int32[s0, s1] = neg(%13) {}
      yield %18, %19, %21, %22
    }
  }
  return %5, %6, %7, %8
})");
  const int64_t rows = 1001, cols = 1003;
  std::vector<Tensor> inputs = {
      pattern(DType::Float32, {rows, cols}, 1), pattern(DType::Float32, {cols}, 2),
      pattern(DType::Float32, {rows, 1}, 3), pattern(DType::Bool, {rows, cols}, 4),
      pattern(DType::Int32, {rows, cols}, 5)};
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  CodegenOptions options;
  options.keep_ir = true;
  std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1}, options);
  EXPECT_EQ(module->mlir_text().find("nontemporal") != std::string::npos, kStreamingHost);
  exec::FusedKernelFn fn = module->lookup("fused_0");
  std::vector<Tensor> streamed = run_shifted(fn, *c.fused, inputs, {rows, cols}, 0, 333);
  std::vector<Tensor> normal = run_shifted(fn, *c.fused, inputs, {rows, cols}, 1, 333);
  std::vector<Tensor> want = reference(c, inputs);
  for (size_t k = 0; k < want.size(); ++k) {
    std::string what = "output " + std::to_string(k);
    expect_close(streamed[k], normal[k], {}, what + ", streamed against the normal loop");
    expect_close(streamed[k], want[k], {1e-5, 1e-6}, what + " against the reference");
  }
}

TEST(CodegenKernels, StreamingStoresOnlyForLargeStaticOutputs) {
  // relu(x + b): [2048, 2049] float32 is 16.8 MB of output (streaming stores, behind a check
  // that the buffer is line-aligned); [64, 256] has none at all.
  auto bias_relu = [](int64_t rows, int64_t cols) {
    ir::Type t = type(DType::Float32, {rows, cols}), row = type(DType::Float32, {cols});
    return build_case({t, row}, {t}, [&](Graph& r, std::vector<Value*> a) {
      Value* sum = r.add_node(ops::add, no_attrs(), {a[0], a[1]}, {t})->outputs[0];
      return std::vector<Value*>{r.add_node(ops::relu, no_attrs(), {sum}, {t})->outputs[0]};
    });
  };
  CodegenOptions options;
  options.keep_ir = true;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 256}, {2048, 2049}}) {
    Case c = bias_relu(rows, cols);
    exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
    std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1}, options);
    bool large = kStreamingHost && rows * cols * 4 >= (int64_t{16} << 20);
    EXPECT_EQ(module->mlir_text().find("nontemporal") != std::string::npos, large) << rows;
    EXPECT_EQ(module->mlir_text().find("llvm.x86.sse.sfence") != std::string::npos, large) << rows;
    std::vector<Tensor> inputs = {pattern(DType::Float32, {rows, cols}, 1),
                                  pattern(DType::Float32, {cols}, 2)};
    Tensor want = reference(c, inputs)[0];
    exec::FusedKernelFn fn = module->lookup("fused_0");
    for (int64_t shift : {0, 1})  // a line-aligned output streams, the other cannot
      expect_close(run_shifted(fn, *c.fused, inputs, {rows, cols}, shift, rows / 3)[0], want, {},
                   std::to_string(rows) + " rows, output shifted by " + std::to_string(shift));
  }
}

TEST(CodegenKernels, CastsBetweenEveryPairOfDtypes) {
  const std::vector<DType> dtypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                                     DType::Bool};
  // Finite, in range for every integer dtype (float -> int is undefined outside it).
  const std::vector<double> values = {-3.75, -2.5, -1, -0.5, -0.0, 0,
                                      1e-30, 0.5,  1,  2.5,  7.99, 1e9};
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      Case c =
          build_case({type(from, {12})}, {type(to, {12})}, [&](Graph& r, std::vector<Value*> a) {
            ops::CastAttrs attrs;
            attrs.dtype = to;
            return std::vector<Value*>{
                r.add_node(ops::cast, attrs, {a[0]}, {type(to, {12})})->outputs[0]};
          });
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      check_case(c, {make_tensor(from, {12}, values)});
    }
  }
}

TEST(CodegenKernels, SeveralKernelsInOneModule) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[8]
  %1: float32[8] = fused(%0) {kind="elementwise"} {
    region (%2: float32[8]) {
      %3: float32[8] = exp(%2) {}
      yield %3
    }
  }
  %4: int64[8] = fused(%0) {kind="elementwise"} {
    region (%5: float32[8]) {
      %6: int64[8] = cast(%5) {dtype=int64}
      yield %6
    }
  }
  return %1, %4
})");
  std::vector<exec::FusedKernelSpec> specs = {
      exec::fused_kernel_spec(*c.graph->nodes()[0], "fused_0"),
      exec::fused_kernel_spec(*c.graph->nodes()[1], "fused_1")};
  CodegenOptions options;
  options.keep_ir = true;
  std::unique_ptr<KernelModule> module = compile_kernels(specs, options);
  EXPECT_NE(module->lookup("fused_0"), module->lookup("fused_1"));
  const std::string& ir = module->mlir_text();
  EXPECT_NE(
      ir.find("func.func @fused_0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64)"),
      std::string::npos)
      << ir;
  EXPECT_NE(ir.find("func.func @fused_1"), std::string::npos) << ir;
  EXPECT_NE(ir.find("scf.for"), std::string::npos) << ir;
  EXPECT_NE(ir.find("math.exp"), std::string::npos) << ir;
  EXPECT_FALSE(module->target().empty());
  EXPECT_GE(module->timings().llvm_ms, 0.0);
  std::vector<Tensor> inputs = {pattern(DType::Float32, {8})};
  std::vector<Tensor> want = reference(c, inputs);
  expect_close(run_kernel(module->lookup("fused_0"), *c.graph->nodes()[0], inputs, {8})[0], want[0],
               {1e-6, 0}, "fused_0");
  expect_close(run_kernel(module->lookup("fused_1"), *c.graph->nodes()[1], inputs, {8})[0], want[1],
               {}, "fused_1");
  expect_error([&] { module->lookup("fused_2"); },
               {"[codegen] expected a kernel named 'fused_2' in this module, found only: "
                "fused_0, fused_1"});
}

TEST(CodegenKernels, PortableTargetComputesTheSame) {
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[100]
  %1: float32[100] = fused(%0) {kind="elementwise"} {
    region (%2: float32[100]) {
      %3: float32[100] = sin(%2) {}
      %4: float32[100] = mul(%3, %2) {}
      yield %4
    }
  }
  return %1
})");
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  CodegenOptions portable;
  portable.host_cpu_features = false;
  std::unique_ptr<KernelModule> plain = compile_kernels({&spec, 1}, portable);
  std::unique_ptr<KernelModule> host = compile_kernels({&spec, 1});
  EXPECT_EQ(plain->target().find("+avx2"), std::string::npos) << plain->target();
  std::printf("[codegen] host target: %s; portable target: %s\n", host->target().c_str(),
              plain->target().c_str());
  std::vector<Tensor> inputs = {pattern(DType::Float32, {100})};
  std::vector<Tensor> want = reference(c, inputs);
  expect_close(run_kernel(plain->lookup("fused_0"), *c.fused, inputs, {100})[0], want[0],
               {1e-5, 1e-6}, "portable");
  expect_close(run_kernel(host->lookup("fused_0"), *c.fused, inputs, {100})[0], want[0],
               {1e-5, 1e-6}, "host");
}

// ---- every elementwise op against its eager kernel ----

TEST(CodegenKernels, EveryElementwiseOpMatchesItsEagerKernel) {
  ElementwiseOpCases all = every_elementwise_op_case();
  std::vector<OpCase>& cases = all.cases;
  const std::set<std::string>& covered = all.covered;
  const std::string& without_body = all.without_body;
  // All kernels in one module: one LLVM run, and a large module is tested too.
  std::vector<exec::FusedKernelSpec> specs;
  for (size_t i = 0; i < cases.size(); ++i)
    specs.push_back(exec::fused_kernel_spec(*cases[i].c.fused, "op_" + std::to_string(i)));
  std::unique_ptr<KernelModule> module = compile_kernels(specs);
  for (size_t i = 0; i < cases.size(); ++i) {
    const OpCase& oc = cases[i];
    SCOPED_TRACE(oc.label);
    Tensor got =
        run_kernel(module->lookup(specs[i].name), *oc.c.fused, oc.inputs, oc.want.sizes())[0];
    expect_close(got, oc.want, oc.tol, oc.label);
  }
  std::printf(
      "[codegen] every elementwise op: %zu ops in %zu kernels (one module: build %.0f ms, "
      "lower %.0f ms, LLVM %.0f ms); without a scalar body:%s\n",
      covered.size(), cases.size(), module->timings().build_ms, module->timings().lower_ms,
      module->timings().llvm_ms, without_body.empty() ? " none" : without_body.c_str());
  EXPECT_GE(covered.size(), 40u);
}

// ---- test ops: a ScalarOp applied directly, and bodies the error tests write ----

struct ScalarOpAttrs : AttrsOf<ScalarOpAttrs> {
  int64_t op = 0;  // a ScalarOp
  template <class V>
  void fields(V& v) {
    v("op", op);
  }
};

void infer_like_first(InferCall& c) {
  c.outputs.push_back({c.inputs[0].dtype(), Shape(c.inputs[0].sizes()), c.inputs[0].device()});
}

// Applies the unary ScalarOp its attributes name (Opaque: the table test skips it).
const OpDef& scalar_unary_op() {
  static OpDef* op = [] {
    ScalarBodyFn body = [](ScalarBuilder& b, const Attrs& a, std::span<const ScalarValue> x) {
      return b.unary(static_cast<ScalarOp>(static_cast<const ScalarOpAttrs&>(a).op), x[0]);
    };
    return new OpDef("codegen_test_unary", {"x"}, infer_like_first, LoweringClass::Opaque,
                     attrs_of<ScalarOpAttrs>(), {.scalar_body = body});
  }();
  return *op;
}

// Runs whatever `custom_body` holds (the error tests set it).
std::function<ScalarValue(ScalarBuilder&, std::span<const ScalarValue>)> custom_body;
const OpDef& custom_op() {
  static OpDef* op = [] {
    ScalarBodyFn body = [](ScalarBuilder& b, const Attrs&, std::span<const ScalarValue> x) {
      return custom_body(b, x);
    };
    return new OpDef("codegen_test_custom", {"..."}, infer_like_first, LoweringClass::Opaque,
                     {.scalar_body = body});
  }();
  return *op;
}

// ---- accuracy of the float32 math ----

struct Sweep {
  const char* name;
  ScalarOp op;  // ignored for sigmoid
  std::vector<float> x;
  double (*ref)(double);
};

std::vector<float> linspace(double lo, double hi, int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(lo + (hi - lo) * i / (n - 1)));
  return v;
}
// ±[10^lo, 10^hi], log-spaced.
std::vector<float> logspace_both_signs(double lo, double hi, int n) {
  std::vector<float> v;
  for (float m : linspace(lo, hi, n)) {
    v.push_back(static_cast<float>(std::pow(10.0, m)));
    v.push_back(-static_cast<float>(std::pow(10.0, m)));
  }
  return v;
}
std::vector<float> concat(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct ErrorStats {
  double max_ulp = 0, max_rel = 0;
};

// Error of `got` against the exact (double) value: in float32 ulps, and relative where the
// exact value is not tiny.
ErrorStats error_stats(const std::vector<float>& x, const float* got, double (*ref)(double)) {
  ErrorStats s;
  for (size_t i = 0; i < x.size(); ++i) {
    double r = ref(x[i]);
    auto rf = static_cast<float>(r);
    double ulp =
        std::nextafter(std::abs(rf), std::numeric_limits<float>::infinity()) - std::abs(rf);
    double err = std::abs(static_cast<double>(got[i]) - r);
    s.max_ulp = std::max(s.max_ulp, err / ulp);
    if (std::abs(r) > 1e-6) s.max_rel = std::max(s.max_rel, err / std::abs(r));
  }
  return s;
}

TEST(CodegenKernels, Float32MathAccuracyAgainstDoubleLibm) {
  const int n = 1 << 18;
  std::vector<Sweep> sweeps = {
      {"exp", ScalarOp::Exp, linspace(-87, 88.5, n), [](double v) { return std::exp(v); }},
      {"log", ScalarOp::Log, concat(linspace(0.5, 2, n), linspace(1e-30, 1e30, n)),
       [](double v) { return std::log(v); }},
      {"log1p", ScalarOp::Log1p, concat(linspace(-0.99, 10, n), logspace_both_signs(-10, -2, n)),
       [](double v) { return std::log1p(v); }},
      {"tanh", ScalarOp::Tanh, concat(linspace(-10, 10, n), logspace_both_signs(-8, -2, n)),
       [](double v) { return std::tanh(v); }},
      {"erf", ScalarOp::Erf, concat(linspace(-4, 4, n), logspace_both_signs(-8, -2, n)),
       [](double v) { return std::erf(v); }},
      {"sin [-pi, pi]", ScalarOp::Sin, linspace(-M_PI, M_PI, n),
       [](double v) { return std::sin(v); }},
      {"sin [-100, 100]", ScalarOp::Sin, linspace(-100, 100, n),
       [](double v) { return std::sin(v); }},
      {"cos [-pi, pi]", ScalarOp::Cos, linspace(-M_PI, M_PI, n),
       [](double v) { return std::cos(v); }},
      {"cos [-100, 100]", ScalarOp::Cos, linspace(-100, 100, n),
       [](double v) { return std::cos(v); }},
      {"sigmoid (op)", ScalarOp::Exp, linspace(-30, 30, n),
       [](double v) { return 1 / (1 + std::exp(-v)); }},
  };
  std::vector<Case> cases;
  std::vector<exec::FusedKernelSpec> specs;
  for (const Sweep& s : sweeps) {
    ir::Type t = type(DType::Float32, {static_cast<int64_t>(s.x.size())});
    bool sigmoid = std::string(s.name).starts_with("sigmoid");
    cases.push_back(build_case({t}, {t}, [&](Graph& r, std::vector<Value*> a) {
      ScalarOpAttrs attrs;
      attrs.op = static_cast<int64_t>(s.op);
      const OpDef& op = sigmoid ? ops::sigmoid : scalar_unary_op();
      const Attrs& at = sigmoid ? static_cast<const Attrs&>(no_attrs()) : attrs;
      return std::vector<Value*>{r.add_node(op, at, {a[0]}, {t})->outputs[0]};
    }));
  }
  for (size_t i = 0; i < cases.size(); ++i)
    specs.push_back(exec::fused_kernel_spec(*cases[i].fused, "math_" + std::to_string(i)));
  std::unique_ptr<KernelModule> module = compile_kernels(specs);
  for (size_t i = 0; i < sweeps.size(); ++i) {
    const Sweep& s = sweeps[i];
    const auto size = static_cast<int64_t>(s.x.size());
    Tensor x = Tensor::empty({size}, DType::Float32);
    std::copy(s.x.begin(), s.x.end(), x.data_ptr<float>());
    Tensor got = run_kernel(module->lookup(specs[i].name), *cases[i].fused, {x}, {size})[0];
    ErrorStats jit = error_stats(s.x, got.data_ptr<float>(), s.ref);
    std::printf("[codegen] %-16s fused: max %5.2f ulp, max rel %.2e", s.name, jit.max_ulp,
                jit.max_rel);
    const OpDef* eager_op = find_op(std::string(s.name).substr(0, std::string(s.name).find(' ')));
    if (eager_op) {
      Tensor eager = dispatch1(*eager_op, TensorSpan(&x, 1));
      ErrorStats e = error_stats(s.x, eager.data_ptr<float>(), s.ref);
      std::printf("   (eager: max %5.2f ulp, max rel %.2e)", e.max_ulp, e.max_rel);
    }
    std::printf("\n");
    // Regressions only: the figures above are the report.
    EXPECT_LT(jit.max_rel, 1e-5) << s.name;
  }
}

// ---- errors ----

TEST(CodegenKernels, UnsupportedDtypesNameTheKernelAndOp) {
  // (Built directly: float16 arithmetic does not even verify.)
  Case input = build_case(
      {type(DType::Float16, {4})}, {type(DType::Float32, {4})},
      [](Graph& r, std::vector<Value*> a) {
        ops::CastAttrs to_f32;
        return std::vector<Value*>{
            r.add_node(ops::cast, to_f32, {a[0]}, {type(DType::Float32, {4})})->outputs[0]};
      });
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*input.fused, "fused_3");
  expect_error(
      [&] {
        compile_kernels({&spec, 1});
      },
      {"[codegen] kernel 'fused_3': region input 0 has dtype float16; expected float32, "
       "float64, int32, int64 or bool",
       "Fix: leave it out of the fusion group"});
  Case node = parse_case(R"(graph g {
  input %0 "x": float32[4]
  %1: float16[4] = fused(%0) {kind="elementwise"} {
    region (%2: float32[4]) {
      %3: float16[4] = cast(%2) {dtype=float16}
      yield %3
    }
  }
  return %1
})");
  spec = exec::fused_kernel_spec(*node.fused, "fused_4");
  expect_error(
      [&] {
        compile_kernels({&spec, 1});
      },
      {"[codegen] kernel 'fused_4': op cast %3 has dtype float16"});
}

TEST(CodegenKernels, OpsWithoutScalarBodyAreRejected) {
  static OpDef no_body("codegen_test_no_body", {"x"}, infer_like_first, LoweringClass::Opaque);
  ir::Type t = type(DType::Float32, {4});
  Case c = build_case({t}, {t}, [&](Graph& r, std::vector<Value*> a) {
    return std::vector<Value*>{r.add_node(no_body, no_attrs(), {a[0]}, {t})->outputs[0]};
  });
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  expect_error(
      [&] {
        compile_kernels({&spec, 1});
      },
      {"[codegen] kernel 'fused_0': op codegen_test_no_body %",
       "has no scalar body "
       "(lowering class opaque)",
       "Fix: leave it out of the fusion group"});
}

TEST(CodegenKernels, MalformedSpecsAreRejected) {
  ir::Type t = type(DType::Float32, {4});
  Case c = build_case({t}, {t}, [&](Graph& r, std::vector<Value*> a) {
    return std::vector<Value*>{r.add_node(ops::relu, no_attrs(), {a[0]}, {t})->outputs[0]};
  });
  exec::FusedKernelSpec good = exec::fused_kernel_spec(*c.fused, "fused_0");
  exec::FusedKernelSpec no_region = good;
  no_region.region = nullptr;
  expect_error(
      [&] {
        compile_kernels({&no_region, 1});
      },
      {"[codegen] kernel 'fused_0': expected a fusion region, found none"});
  exec::FusedKernelSpec no_rows = good;
  no_rows.broadcast.clear();
  expect_error(
      [&] {
        compile_kernels({&no_rows, 1});
      },
      {"expected iteration dims and one broadcast row per region input (1), found 1 "
       "dims and 0 rows"});
  exec::FusedKernelSpec short_row = good;
  short_row.dims = {2, 2};
  expect_error(
      [&] {
        compile_kernels({&short_row, 1});
      },
      {"expected 2 broadcast flags per input (one per iteration dim), found 1"});
  std::vector<exec::FusedKernelSpec> twice = {good, good};
  expect_error([&] { compile_kernels(twice); },
               {"[codegen] expected unique kernel names, found 'fused_0' twice"});

  Case no_outputs =
      build_case({t}, {}, [](Graph&, std::vector<Value*>) { return std::vector<Value*>{}; });
  exec::FusedKernelSpec empty = good;
  empty.region = no_outputs.fused->regions[0].get();
  expect_error(
      [&] {
        compile_kernels({&empty, 1});
      },
      {"expected the region to have outputs, found none"});

  // A node reading a value from outside its (isolated) region.
  Case outside = build_case({t}, {t}, [&](Graph& r, std::vector<Value*>) {
    Value* stray = r.parent()->inputs()[0].value;
    return std::vector<Value*>{r.add_node(ops::relu, no_attrs(), {stray}, {t})->outputs[0]};
  });
  exec::FusedKernelSpec stray = exec::fused_kernel_spec(*outside.fused, "fused_0");
  expect_error(
      [&] {
        compile_kernels({&stray, 1});
      },
      {"expected value %0 to be defined earlier in the region"});
}

TEST(CodegenKernels, NodesWithSeveralOutputsAreRejected) {
  ir::Type t = type(DType::Float32, {4});
  Case c = build_case({t}, {t}, [&](Graph& r, std::vector<Value*> a) {
    return std::vector<Value*>{r.add_node(custom_op(), no_attrs(), {a[0]}, {t, t})->outputs[0]};
  });
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  expect_error(
      [&] {
        compile_kernels({&spec, 1});
      },
      {"expected op codegen_test_custom %", "to have one output, found 2"});
}

// Compiles one custom op over a float32 operand, its body given by `body`.
void compile_custom(std::function<ScalarValue(ScalarBuilder&, std::span<const ScalarValue>)> body) {
  custom_body = std::move(body);
  ir::Type t = type(DType::Float32, {4});
  Case c = build_case({t}, {t}, [&](Graph& r, std::vector<Value*> a) {
    return std::vector<Value*>{r.add_node(custom_op(), no_attrs(), {a[0]}, {t})->outputs[0]};
  });
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  compile_kernels({&spec, 1});
}

TEST(CodegenKernels, ScalarBuilderMisuseNamesTheOp) {
  const std::string_view where = "[codegen] kernel 'fused_0', op codegen_test_custom %";
  expect_error(
      [] {
        compile_custom(
            [](ScalarBuilder& b, auto x) { return b.add(x[0], b.constant(1, DType::Int64)); });
      },
      {where, "expected the operands of add to share a dtype, found float32 and int64",
       "Fix: cast one operand"});
  expect_error(
      [] {
        compile_custom([](ScalarBuilder& b, auto x) {
          return b.cast(b.unary(ScalarOp::Exp, b.cast(x[0], DType::Int32)), DType::Float32);
        });
      },
      {where, "expected exp on a dtype it supports", "found int32"});
  expect_error(
      [] {
        compile_custom(
            [](ScalarBuilder& b, auto x) { return b.binary(ScalarOp::And, x[0], x[0]); });
      },
      {"expected and on a dtype it supports", "found float32"});
  expect_error([] { compile_custom([](ScalarBuilder&, auto) { return ScalarValue{}; }); },
               {where, "expected a ScalarValue made by this builder, found id -1"});
  expect_error(
      [] { compile_custom([](ScalarBuilder& b, auto) { return b.constant(0, DType::Int64); }); },
      {"expected the scalar body to return the op's output dtype float32, found int64"});
  expect_error(
      [] { compile_custom([](ScalarBuilder& b, auto x) { return b.select(x[0], x[0], x[0]); }); },
      {where, "expected a bool select condition, found float32"});
  expect_error(
      [] {
        compile_custom([](ScalarBuilder& b, auto x) {
          return b.select(b.binary(ScalarOp::Gt, x[0], x[0]), x[0], b.constant(0, DType::Float64));
        });
      },
      {"expected both select branches of one dtype, found float32 and float64"});
  expect_error(
      [] {
        compile_custom([](ScalarBuilder& b, auto x) {
          return b.add(x[0], b.cast(b.constant(1, DType::Float16), DType::Float32));
        });
      },
      {where,
       "expected a constant of dtype float32, float64, int32, int64 or bool, "
       "found float16"});
  expect_error(
      [] {
        compile_custom([](ScalarBuilder& b, auto x) {
          return b.cast(b.cast(x[0], DType::BFloat16), DType::Float32);
        });
      },
      {"expected a cast of dtype float32, float64, int32, int64 or bool, found bfloat16"});
}

// ---- speed (printed, never asserted) ----

// The same computation written by hand, built for speed (-O3, AVX2 + FMA; without
// trapping math GCC if-converts the relu instead of branching) so that the comparison is
// with the best plain C++ (the test's own flags are -O2, no -march).
__attribute__((optimize("O3", "no-trapping-math"), target("avx2,fma"))) void hand_fused_loop(
    const float* __restrict x, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * 1.5f + -0.25f;
    out[i] = (v > 0 ? v : 0.0f) * 0.75f - 2.0f;
  }
}

TEST(CodegenKernels, CompileTimeAndBandwidthReport) {
  // relu(x * a + b) * c - d with scalar a, b, c, d: five ops.
  const char* text = testing::kFiveOpKernel;
  Case c = parse_case(text);
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  auto start = now();
  std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1});
  double compile_ms = ms(now() - start);
  const CodegenTimings& tm = module->timings();
  CodegenOptions portable_options;
  portable_options.host_cpu_features = false;
  std::unique_ptr<KernelModule> portable = compile_kernels({&spec, 1}, portable_options);

  const int64_t n = 16 << 20;
  Tensor x = pattern(DType::Float32, {n});
  std::vector<Tensor> inputs = {
      x, make_tensor(DType::Float32, {}, {1.5}), make_tensor(DType::Float32, {}, {-0.25}),
      make_tensor(DType::Float32, {}, {0.75}), make_tensor(DType::Float32, {}, {2})};
  Tensor out = Tensor::empty({n}, DType::Float32);
  auto best_of = [&](const std::function<void()>& f) {
    f();  // first touch of the output pages
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      auto t0 = now();
      f();
      best = std::min(best, ms(now() - t0));
    }
    return best;
  };
  auto run = [&](const KernelModule& m) {
    exec::FusedKernelFn fn = m.lookup("fused_0");
    std::vector<void*> buffers;
    for (const Tensor& t : inputs) buffers.push_back(t.raw_data());
    buffers.push_back(out.raw_data());
    return best_of([&] { fn(buffers.data(), &n, 0, n); });
  };
  double jit_ms = run(*module);
  Tensor jit_out = run_kernel(module->lookup("fused_0"), *c.fused, inputs, {n})[0];
  double portable_ms = run(*portable);
  const float* xs = x.data_ptr<float>();
  float* os = out.data_ptr<float>();
  double cpp_ms = best_of([&] { hand_fused_loop(xs, os, n); });
  expect_close(jit_out, out, {}, "the C++ loop");

  // Compute-bound: tanh through the polynomial approximation (vectorized) against libm.
  ir::Type t = type(DType::Float32, {n});
  Case tanh_case = build_case({t}, {t}, [&](Graph& r, std::vector<Value*> a) {
    return std::vector<Value*>{r.add_node(ops::tanh, no_attrs(), {a[0]}, {t})->outputs[0]};
  });
  exec::FusedKernelSpec tanh_spec = exec::fused_kernel_spec(*tanh_case.fused, "fused_0");
  std::unique_ptr<KernelModule> tanh_module = compile_kernels({&tanh_spec, 1});
  exec::FusedKernelFn tanh_fn = tanh_module->lookup("fused_0");
  void* tanh_buffers[] = {x.raw_data(), out.raw_data()};
  double tanh_jit_ms = best_of([&] { tanh_fn(tanh_buffers, &n, 0, n); });
  double tanh_cpp_ms = best_of([&] {
    for (int64_t i = 0; i < n; ++i) os[i] = std::tanh(xs[i]);
  });
  const double gb = 2.0 * static_cast<double>(n) * sizeof(float) / 1e9;
  std::printf(
      "[codegen] compile_kernels, 5-op kernel: %.1f ms (build %.1f, lower %.1f, LLVM "
      "%.1f) for %s\n",
      compile_ms, tm.build_ms, tm.lower_ms, tm.llvm_ms, module->target().c_str());
  std::printf(
      "[codegen] relu(x*a+b)*c-d on 16M floats, one thread: JIT %.2f ms (%.1f GB/s), "
      "portable JIT %.2f ms (%.1f GB/s), C++ loop -O3 AVX2 %.2f ms (%.1f GB/s)\n",
      jit_ms, gb / jit_ms * 1e3, portable_ms, gb / portable_ms * 1e3, cpp_ms, gb / cpp_ms * 1e3);
  std::printf(
      "[codegen] tanh(x) on 16M floats, one thread: JIT %.2f ms, C++ std::tanh loop "
      "%.2f ms\n",
      tanh_jit_ms, tanh_cpp_ms);
}

TEST(CodegenKernels, SmallKernelCallTimeReport) {
  // relu(x + bias) on [64, 256]: a kernel far below the streaming-store size, with static and
  // with run-time dims (whose kernels also hold the streaming loop, not taken here).
  auto bias_relu = [](const std::string& rows, const std::string& cols) {
    std::string x = "float32[" + rows + ", " + cols + "]", b = "float32[" + cols + "]";
    return parse_case("graph g {\n  input %0 \"x\": " + x + "\n  input %1 \"b\": " + b +
                      "\n  %2: " + x + " = fused(%0, %1) {kind=\"elementwise\"} {\n" +
                      "    region (%3: " + x + ", %4: " + b + ") {\n      %5: " + x +
                      " = add(%3, %4) {}\n      %6: " + x + " = relu(%5) {}\n" +
                      "      yield %6\n    }\n  }\n  return %2\n}");
  };
  Tensor x = pattern(DType::Float32, {64, 256}, 1), b = pattern(DType::Float32, {256}, 2);
  Tensor out = Tensor::empty({64, 256}, DType::Float32);
  void* buffers[] = {x.raw_data(), b.raw_data(), out.raw_data()};
  const int64_t dims[] = {64, 256};
  for (bool dynamic : {false, true}) {
    Case c = dynamic ? bias_relu("s0", "s1") : bias_relu("64", "256");
    exec::FusedKernelSpec spec = exec::fused_kernel_spec(*c.fused, "fused_0");
    std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1});
    exec::FusedKernelFn fn = module->lookup("fused_0");
    expect_close(run_kernel(fn, *c.fused, {x, b}, {64, 256})[0], reference(c, {x, b})[0], {},
                 "bias + relu");
    const int calls = 20000;
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) fn(buffers, dims, 0, 64);
      auto t1 = std::chrono::steady_clock::now();
      best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
    }
    std::printf(
        "[codegen] relu(x + bias) on [64, 256] float32, %s dims, one thread: %.0f ns "
        "per call\n",
        dynamic ? "run-time" : "static", best);
  }
}

}  // namespace
}  // namespace kiln::cpu::codegen
