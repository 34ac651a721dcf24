// Row kernels: fusion groups of kind "row", whose reductions over the last dim run inside
// the kernel with the elementwise ops around them (softmax, log_softmax and layer_norm as the
// decompose pass writes them). Their iteration spaces, and each kernel against the reference
// executor (which runs the region op by op) on random data, special values, several dtypes,
// symbolic sizes and split row ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/op_cases.h"
#include "codegen/row_cases.h"
#include "kiln/cpu/codegen/kernels.h"
#include "kiln/cpu/kernels/register.h"
#include "kiln/dispatch.h"
#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/fused.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cpu::codegen {
namespace {

using testing::softmax_ir;

const ir::Node* fused_node(const ir::Graph& g) {
  for (const auto& node : g.nodes())
    if (node->op == &ops::fused) return node.get();
  ADD_FAILURE() << "no fused node in\n" << ir::print_graph(g);
  return nullptr;
}

Tensor from_values(DType dtype, IntList sizes, const std::vector<double>& v) {
  Tensor t = Tensor::empty(sizes, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::Float32)
      static_cast<float*>(t.raw_data())[i] = static_cast<float>(v[i]);
    else
      static_cast<double*>(t.raw_data())[i] = v[i];
  }
  return t;
}

// Normal values with a spread that makes exp() and sums interesting.
Tensor random_tensor(DType dtype, IntList sizes, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<double> v(static_cast<size_t>(numel(sizes)));
  for (double& x : v) x = normal(rng);
  return from_values(dtype, sizes, v);
}

Tensor scalar(double value, DType dtype) {
  return from_values(dtype, {}, {value});
}

// Compiles the graph's row group, runs it over the concrete `iteration` shape (the shape its
// reductions read; symbolic sizes are known from it) and compares every output with the
// reference executor: NaN where it has NaN, infinities exact, else within atol + rtol |want|.
// With split >= 0 the rows run as two calls.
void check_row_kernel(std::string_view ir_text, const std::vector<Tensor>& inputs,
                      IntList iteration, double rtol, int64_t split = -1, double atol = 1e-30) {
  cpu::kernels::register_kernels();
  std::shared_ptr<ir::Graph> graph = ir::parse_graph(ir_text);
  ir::verify(*graph);
  const ir::Node* node = fused_node(*graph);
  ASSERT_NE(node, nullptr);
  std::vector<Tensor> want = interp::Executable(graph).run(inputs);

  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*node, "row_0");
  ASSERT_TRUE(spec.rows);
  std::unique_ptr<KernelModule> module = compile_kernels({&spec, 1});
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) buffers.push_back(t.raw_data());
  std::vector<Tensor> got;
  for (const Tensor& w : want) {
    got.push_back(Tensor::empty(w.sizes(), w.dtype()));
    buffers.push_back(got.back().raw_data());
  }
  std::vector<int64_t> dims = testing::runtime_dims(*node, iteration);
  exec::FusedKernelFn fn = module->lookup("row_0");
  ASSERT_LT(split, dims[0]) << "split inside the rows";
  if (split < 0) {
    fn(buffers.data(), dims.data(), 0, dims[0]);
  } else {
    fn(buffers.data(), dims.data(), 0, split);
    fn(buffers.data(), dims.data(), split, dims[0]);
  }
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(count_mismatches(got[k].to_vector<double>(), want[k].to_vector<double>(), rtol, atol,
                               "output " + std::to_string(k)),
              0)
        << "output " << k << " mismatches";
}


// ---- iteration spaces ----

TEST(CodegenRowKernels, SpecKeepsTheReducedDimApartAndMarksPerRowOutputs) {
  std::shared_ptr<ir::Graph> g = ir::parse_graph(R"(graph g {
  input %0 "x": float32[4, 3, 8]
  input %1 "w": float32[8]
  %2, %3: float32[4, 3, 8], float32[4, 3, 1] = fused(%0, %1) {kind="row"} {
    region (%4: float32[4, 3, 8], %5: float32[8]) {
      %6: float32[4, 3, 8] = mul(%4, %5) {}
      %7: float32[4, 3, 1] = sum(%6) {dims=[2], keepdim=true}
      %8: float32[4, 3, 8] = sub(%6, %7) {}
      yield %8, %7
    }
  }
  return %2, %3
})");
  const ir::Node& node = *fused_node(*g);
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(node, "k");
  EXPECT_TRUE(spec.rows);
  EXPECT_EQ(spec.dims, (std::vector<int64_t>{12, 8}));
  EXPECT_EQ(spec.broadcast, (std::vector<std::vector<bool>>{{false, false}, {true, false}}));
  EXPECT_EQ(spec.output_per_row, (std::vector<bool>{false, true}));
  EXPECT_EQ(exec::fused_iteration_shape(node), (Shape{4, 3, 8}));
  EXPECT_EQ(exec::fused_dim_groups(node), (std::vector<std::vector<int>>{{0, 1}, {2}}));
}

TEST(CodegenRowKernels, SpecOfOneRowHasADimOfOneRow) {
  std::shared_ptr<ir::Graph> g = ir::parse_graph(R"(graph g {
  input %0 "x": float64[300]
  %1: float64[1] = fused(%0) {kind="row"} {
    region (%2: float64[300]) {
      %3: float64[1] = amin(%2) {dims=[0], keepdim=true}
      yield %3
    }
  }
  return %1
})");
  const ir::Node& node = *fused_node(*g);
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(node, "k");
  EXPECT_EQ(spec.dims, (std::vector<int64_t>{1, 300}));
  EXPECT_EQ(spec.output_per_row, (std::vector<bool>{true}));
  EXPECT_EQ(exec::fused_dim_groups(node), (std::vector<std::vector<int>>{{}, {0}}));
  check_row_kernel(ir::print_graph(*g), {random_tensor(DType::Float64, {300}, 1)}, {300}, 0);
}

TEST(CodegenRowKernels, SpecSymbolicRowsAreRuntimeDims) {
  std::shared_ptr<ir::Graph> g = ir::parse_graph(softmax_ir("s0", "64"));
  exec::FusedKernelSpec spec = exec::fused_kernel_spec(*fused_node(*g), "k");
  EXPECT_EQ(spec.dims, (std::vector<int64_t>{-1, 64}));
}

TEST(CodegenRowKernels, SpecRejectsOutputsOfAnotherShape) {
  std::shared_ptr<ir::Graph> g = ir::parse_graph(R"(graph g {
  input %0 "x": float32[4, 8]
  %1: float32[1, 8] = fused(%0) {kind="row"} {
    region (%2: float32[4, 8]) {
      %3: float32[4, 1] = sum(%2) {dims=[1], keepdim=true}
      %4: float32[1, 8] = sum(%2) {dims=[0], keepdim=true}
      yield %4
    }
  }
  return %1
})");
  expect_error([&] { exec::fused_kernel_spec(*fused_node(*g), "k"); },
               {"[codegen] expected output 0 of fused node %1 to have the row group's shape "
                "[4, 8] or its row shape [4, 1], found float32[1, 8]",
                "Fix: a row group's results are per element or per row"});
}

TEST(CodegenRowKernels, SpecRejectsReductionsOfAnotherShape) {
  std::shared_ptr<ir::Graph> g = ir::parse_graph(R"(graph g {
  input %0 "x": float32[4, 8]
  %1: float32[4, 1] = fused(%0) {kind="row"} {
    region (%2: float32[4, 8]) {
      %3: float32[4, 1] = sum(%2) {dims=[1], keepdim=true}
      %4: float32[4, 1] = sum(%3) {dims=[1], keepdim=true}
      yield %4
    }
  }
  return %1
})");
  expect_error([&] { exec::fused_kernel_spec(*fused_node(*g), "k"); },
               {"[codegen] expected every reduction of the row group fused node %1 to reduce "
                "the shape [4, 8], found float32[4, 1] for sum %4",
                "Fix: a row kernel loops over one row length"});
}

// ---- kernels vs the reference executor ----

TEST(CodegenRowKernels, SoftmaxMatchesTheReference) {
  // 300 columns: vector loops plus a remainder; 37 rows split unevenly.
  check_row_kernel(softmax_ir("37", "300"), {random_tensor(DType::Float32, {37, 300}, 2)},
                   {37, 300}, 2e-6, 11);
  check_row_kernel(softmax_ir("5", "129", "float64"), {random_tensor(DType::Float64, {5, 129}, 3)},
                   {5, 129}, 1e-13);
}

TEST(CodegenRowKernels, LargeOutputsTakeTheStreamingStores) {
  // 32 MiB of output with rows of whole cache lines: streaming stores (then a fence); rows of
  // 1000 floats do not start on a line, so the same size takes the plain stores.
  check_row_kernel(softmax_ir("8192", "1024"), {random_tensor(DType::Float32, {8192, 1024}, 11)},
                   {8192, 1024}, 2e-6, 1001);
  check_row_kernel(softmax_ir("s0", "1000"), {random_tensor(DType::Float32, {8400, 1000}, 12)},
                   {8400, 1000}, 2e-6);
  auto has_streaming_code = [](const std::string& text) {
    std::shared_ptr<ir::Graph> g = ir::parse_graph(text);
    exec::FusedKernelSpec spec = exec::fused_kernel_spec(*fused_node(*g), "k");
    CodegenOptions options;
    options.keep_ir = true;
    return compile_kernels({&spec, 1}, options)->mlir_text().find("nontemporal") !=
           std::string::npos;
  };
  EXPECT_TRUE(has_streaming_code(softmax_ir("8192", "1024")));
  EXPECT_TRUE(has_streaming_code(softmax_ir("s0", "s1")));       // decided per call
  EXPECT_FALSE(has_streaming_code(softmax_ir("s0", "1000")));    // rows never start on a line
  EXPECT_FALSE(has_streaming_code(softmax_ir("4096", "1024")));  // 16 MiB stay in the L3
}

TEST(CodegenRowKernels, SymbolicRowsTakeTheirSizeAtRunTime) {
  for (int64_t rows : {1, 6, 33})
    check_row_kernel(softmax_ir("s0", "40"), {random_tensor(DType::Float32, {rows, 40}, 4)},
                     {rows, 40}, 2e-6);
}

TEST(CodegenRowKernels, SoftmaxOfInfinitiesAndNaNsMatchesTheReference) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Rows: ordinary, one -inf, all -inf (NaN everywhere), one +inf (NaN: inf - inf), a NaN,
  // huge values (no overflow: the max is subtracted first).
  std::vector<double> v = {1, 2,   3, 4, -inf, 0,   1, 2, -inf, -inf, -inf,  -inf,
                           1, inf, 2, 3, 1,    nan, 2, 3, 1e30, 1e30, -1e30, 0};
  check_row_kernel(softmax_ir("6", "4"), {from_values(DType::Float32, {6, 4}, v)}, {6, 4}, 2e-6);
}

TEST(CodegenRowKernels, LayerNormWithWeightBiasAndStatistics) {
  check_row_kernel(testing::kLayerNormRows,
                   {random_tensor(DType::Float32, {33, 96}, 5),
                    random_tensor(DType::Float32, {96}, 6), random_tensor(DType::Float32, {96}, 7),
                    scalar(96.0, DType::Float32), scalar(1e-5, DType::Float32)},
                   // y = (x - mean) * rstd * w + b cancels to about 0 in places: an absolute
                   // bound for those, at float32 rounding of the terms (about 10).
                   {33, 96}, 1e-5, 20, 1e-5);
}

TEST(CodegenRowKernels, ReductionsOfProducersWithPerRowResultsOnly) {
  // sum(relu(x * w)) and amin(x) per row of a 3-D input whose weight broadcasts over the
  // middle dim; amax/amin propagate NaN.
  Tensor x = random_tensor(DType::Float32, {3, 5, 1000}, 8);
  static_cast<float*>(x.raw_data())[1000 * 7 + 13] = std::numeric_limits<float>::quiet_NaN();
  check_row_kernel(testing::kReductions3d,
                   {x, random_tensor(DType::Float32, {3, 1, 1000}, 9)}, {3, 5, 1000}, 1e-5, 2);
}

TEST(CodegenRowKernels, LogSoftmaxOfRowsOfOneElement) {
  // A last dim of size 1: every value is per row, the per-element output is written from it.
  check_row_kernel(testing::kLogSoftmaxRowsOfOne,
                   {random_tensor(DType::Float32, {7, 1}, 10)}, {7, 1}, 0);
}

}  // namespace
}  // namespace kiln::cpu::codegen
