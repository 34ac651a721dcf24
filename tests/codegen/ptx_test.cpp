// The GPU code generator without a GPU: fusion groups to the MLIR gpu dialect (its text checked
// like the CPU code generator's), to PTX for sm_90, and every kernel assembled by ptxas (the
// CUDA toolkit's assembler, which rejects what the driver would). The kernels are the CPU
// code generator's test groups: every elementwise op on every dtype and attribute variant,
// broadcasts of several ranks, several outputs, dynamic dims, and the row kernels of softmax,
// log_softmax, layer_norm and reductions over 3-D iteration spaces. Also the launch geometry
// and every error the generator and the toolkit helpers report. Running the kernels needs a
// GPU: tests/gpu/device_check.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/five_op_kernel.h"
#include "codegen/op_cases.h"
#include "codegen/row_cases.h"
#include "cuda/kernel_bundle.h"
#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/cpu/kernels/register.h"
#include "kiln/cuda/codegen/emulation.h"
#include "kiln/cuda/codegen/ptx.h"
#include "kiln/cuda/codegen/toolkit.h"
#include "kiln/error.h"
#include "kiln/interp/interp.h"
#include "kiln/ir/graph.h"
#include "kiln/ops/elementwise.h"
#include "kiln/serialize/safetensors.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda::codegen {
namespace {

using cpu::codegen::testing::build_case;
using cpu::codegen::testing::Case;
using cpu::codegen::testing::parse_case;
using cpu::codegen::testing::runtime_dims;
using cpu::codegen::testing::softmax_ir;
using cpu::codegen::testing::type;
using cpu::exec::FusedKernelSpec;

// Every test needs libdevice (and the assembling ones ptxas): the CUDA toolkit. The
// development and CI machines have it; elsewhere these tests skip with the reason.
std::string toolkit_missing() {
  try {
    find_libdevice();
  } catch (const Error& e) {
    return std::string("no CUDA toolkit: ") + e.what();
  }
  if (find_ptxas().empty()) return "no CUDA toolkit: no ptxas";
  return "";
}

#define REQUIRE_TOOLKIT()                                        \
  do {                                                           \
    if (std::string why = toolkit_missing(); !why.empty())       \
      GTEST_SKIP() << why;                                       \
  } while (0)

FusedKernelSpec spec_of(const Case& c, const std::string& name) {
  return cpu::exec::fused_kernel_spec(*c.fused, name);
}

// Compiles `specs` (keeping the MLIR) and assembles the PTX with ptxas; returns the module.
PtxModule compile_and_assemble(const std::vector<FusedKernelSpec>& specs) {
  PtxOptions options;
  options.keep_ir = true;
  PtxModule module = compile_ptx(specs, options);
  Cubin cubin = assemble_cubin(module.ptx, module.chip);
  EXPECT_FALSE(cubin.image.empty());
  for (const FusedKernelSpec& spec : specs)
    EXPECT_NE(module.ptx.find(".entry " + spec.name + "("), std::string::npos) << spec.name;
  return module;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// ---- the generated IR and PTX ----

TEST(CudaCodegen, ElementwiseKernelIsAGridStrideLoopOverDenseBuffers) {
  REQUIRE_TOOLKIT();
  Case c = parse_case(cpu::codegen::testing::kFiveOpKernel);
  FusedKernelSpec spec = spec_of(c, "fused_0");
  PtxModule m = compile_and_assemble({spec});
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_EQ(m.kernels[0].kind, FusedKernelKind::Elementwise);
  EXPECT_EQ(m.kernels[0].buffers, 6u);  // x, a, b, c, d, the output
  EXPECT_EQ(m.kernels[0].dims, 1u);
  const std::string& ir = m.mlir_text;
  EXPECT_NE(ir.find("gpu.func @fused_0(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: !llvm.ptr, "
                    "%arg3: !llvm.ptr, %arg4: !llvm.ptr, %arg5: !llvm.ptr, %arg6: i64) kernel"),
            std::string::npos)
      << ir;
  for (const char* id : {"gpu.block_id  x", "gpu.block_dim  x", "gpu.thread_id  x",
                         "gpu.grid_dim  x", "scf.for"})
    EXPECT_NE(ir.find(id), std::string::npos) << id << " in\n" << ir;
  // One merged dim: the flat index is every buffer's offset, no division.
  EXPECT_EQ(ir.find("arith.divui"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("arith.remui"), std::string::npos) << ir;
  // Aligned buffers take 128-bit loads and stores of four elements; the others, and the last
  // n % 4 elements, the scalar loop.
  EXPECT_NE(ir.find("llvm.load %"), std::string::npos);
  EXPECT_NE(ir.find("vector<4xf32>"), std::string::npos) << ir;
  EXPECT_NE(m.ptx.find("ld.global.v4.f32"), std::string::npos) << m.ptx;
  EXPECT_NE(m.ptx.find("st.global.v4.f32"), std::string::npos) << m.ptx;
  EXPECT_NE(m.ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(m.ptx.find(".visible .entry fused_0("), std::string::npos) << m.ptx;
  EXPECT_GT(m.timings.lower_ms, 0);
}

TEST(CudaCodegen, BroadcastsDivideTheFlatIndexByStaticDims) {
  REQUIRE_TOOLKIT();
  // x[4, 3, 8] * w[4, 1, 8]: w broadcasts along the middle dim, so the three dims stay apart
  // and the flat index is split by the (constant) inner sizes.
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[4, 3, 8]
  input %1 "w": float32[4, 1, 8]
  %2: float32[4, 3, 8] = fused(%0, %1) {kind="elementwise"} {
    region (%3: float32[4, 3, 8], %4: float32[4, 1, 8]) {
      %5: float32[4, 3, 8] = mul(%3, %4) {}
      yield %5
    }
  }
  return %2
})");
  FusedKernelSpec spec = spec_of(c, "fused_0");
  ASSERT_EQ(spec.dims, (std::vector<int64_t>{4, 3, 8}));
  PtxModule m = compile_and_assemble({spec});
  EXPECT_EQ(count(m.mlir_text, "arith.divui"), 2u) << m.mlir_text;
  EXPECT_EQ(count(m.mlir_text, "arith.remui"), 2u) << m.mlir_text;
  EXPECT_NE(m.mlir_text.find("arith.constant 8 : i64"), std::string::npos) << m.mlir_text;
}

TEST(CudaCodegen, DynamicDimsAreKernelParameters) {
  REQUIRE_TOOLKIT();
  Case c = parse_case(R"(graph g {
  input %0 "x": float64[s0, s1]
  input %1 "b": float64[s1]
  %2, %3: float64[s0, s1], bool[s0, s1] = fused(%0, %1) {kind="elementwise"} {
    region (%4: float64[s0, s1], %5: float64[s1]) {
      %6: float64[s0, s1] = add(%4, %5) {}
      %7: float64[s0, s1] = tanh(%6) {}
      %8: bool[s0, s1] = gt(%7, %4) {}
      yield %7, %8
    }
  }
  return %2, %3
})");
  FusedKernelSpec spec = spec_of(c, "fused_0");
  ASSERT_EQ(spec.dims, (std::vector<int64_t>{-1, -1}));
  PtxModule m = compile_and_assemble({spec});
  EXPECT_EQ(m.kernels[0].buffers, 4u);
  EXPECT_EQ(m.kernels[0].dims, 2u);
  EXPECT_NE(m.mlir_text.find("arith.remui %"), std::string::npos) << m.mlir_text;
  EXPECT_NE(m.mlir_text.find("math.tanh"), std::string::npos) << m.mlir_text;
  // libdevice's float64 tanh, linked in (no call left to resolve).
  EXPECT_EQ(m.ptx.find("__nv_tanh"), std::string::npos);
  EXPECT_EQ(m.ptx.find(".extern"), std::string::npos) << "an unresolved function in the PTX";
  EXPECT_NE(m.ptx.find("st.global.u8"), std::string::npos) << "the bool output is one byte";
}


TEST(CudaCodegen, RowKernelsReduceAcrossTheBlock) {
  REQUIRE_TOOLKIT();
  Case c = parse_case(softmax_ir("s0", "4096", "float32"));
  FusedKernelSpec spec = spec_of(c, "softmax");
  ASSERT_TRUE(spec.rows);
  PtxModule m = compile_and_assemble({spec});
  EXPECT_EQ(m.kernels[0].kind, FusedKernelKind::Rows);
  const std::string& ir = m.mlir_text;
  EXPECT_EQ(count(ir, "gpu.all_reduce  maximumf"), 1u) << ir;
  EXPECT_EQ(count(ir, "gpu.all_reduce  add"), 1u) << ir;
  EXPECT_EQ(count(ir, "gpu.barrier"), 2u) << ir;
  // Warp shuffles, then shared memory between the warps.
  EXPECT_NE(m.ptx.find("shfl.sync.bfly"), std::string::npos);
  EXPECT_NE(m.ptx.find(".shared"), std::string::npos);
  EXPECT_NE(m.ptx.find("bar.sync"), std::string::npos);
  EXPECT_NE(m.ptx.find("max.NaN.f32"), std::string::npos) << "amax propagates NaN";
}

TEST(CudaCodegen, RowKernelsOfEveryShapeTheCpuTestsUseAssemble) {
  REQUIRE_TOOLKIT();
  std::vector<Case> cases;
  for (const char* dtype : {"float32", "float64"})
    cases.push_back(parse_case(softmax_ir("6", "4", dtype)));
  cases.push_back(parse_case(cpu::codegen::testing::kLayerNormRows));
  cases.push_back(parse_case(cpu::codegen::testing::kReductions3d));
  cases.push_back(parse_case(cpu::codegen::testing::kLogSoftmaxRowsOfOne));
  std::vector<FusedKernelSpec> specs;
  for (size_t i = 0; i < cases.size(); ++i) specs.push_back(spec_of(cases[i], "row_" + std::to_string(i)));
  PtxModule m = compile_and_assemble(specs);
  EXPECT_EQ(m.kernels.size(), specs.size());
  // layer_norm's two statistics are stored by the block's first thread only.
  EXPECT_NE(m.mlir_text.find("scf.if"), std::string::npos);
  // The 3-D reduction's rows are split over two dims: the row index is divided by 5.
  EXPECT_NE(m.mlir_text.find("arith.divui"), std::string::npos);
}

TEST(CudaCodegen, EveryElementwiseOpOnEveryDtypeAssemblesForSm90) {
  REQUIRE_TOOLKIT();
  cpu::kernels::register_kernels();  // the cases' eager results (not needed here) run them
  cpu::codegen::testing::ElementwiseOpCases all = cpu::codegen::testing::every_elementwise_op_case();
  std::vector<FusedKernelSpec> specs;
  for (size_t i = 0; i < all.cases.size(); ++i)
    specs.push_back(spec_of(all.cases[i].c, "op_" + std::to_string(i)));
  PtxOptions options;
  PtxModule m = compile_ptx(specs, options);
  Cubin cubin = assemble_cubin(m.ptx, m.chip, /*verbose=*/true);
  EXPECT_EQ(count(m.ptx, ".visible .entry op_"), specs.size());
  EXPECT_EQ(m.ptx.find(".extern"), std::string::npos) << "an unresolved function in the PTX";
  EXPECT_EQ(count(cubin.log, "Compiling entry function"), specs.size()) << cubin.log;
  std::printf("[cuda codegen] every elementwise op: %zu ops in %zu kernels, PTX %zu KiB (build "
              "%.0f ms, lower to PTX %.0f ms), cubin %zu KiB\n",
              all.covered.size(), specs.size(), m.ptx.size() / 1024, m.timings.build_ms,
              m.timings.lower_ms, cubin.image.size() / 1024);
  EXPECT_GE(all.covered.size(), 40u);
}

// ---- the kernels' logic, run on the CPU (emulation.h) ----

// Normal values with a spread that makes exp() and sums interesting.
Tensor random_normal(IntList sizes, DType dtype, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<double> v(static_cast<size_t>(numel(sizes)));
  for (double& x : v) x = normal(rng);
  return cpu::codegen::testing::make_tensor(dtype, sizes, v);
}

// Runs kernel `name` of `kernels` as `blocks` emulated blocks on `inputs` into outputs shaped
// like `want`, and compares: NaN where want has NaN, infinities exact, else within
// atol + rtol |want| (bit-exact at 0).
void check_emulated(const EmulatedKernels& kernels, const std::string& name, const Case& c,
                    const std::vector<Tensor>& inputs, const std::vector<Tensor>& want,
                    IntList iteration, int64_t blocks, double rtol, double atol,
                    const std::string& label) {
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) buffers.push_back(t.raw_data());
  std::vector<Tensor> got;
  for (const Tensor& w : want) {
    got.push_back(Tensor::empty(w.sizes(), w.dtype()));
    buffers.push_back(got.back().raw_data());
  }
  kernels.run(name, buffers, runtime_dims(*c.fused, iteration), blocks);
  for (size_t k = 0; k < want.size(); ++k)
    count_mismatches(got[k].to_vector<double>(), want[k].to_vector<double>(), rtol, atol,
                     label + " output " + std::to_string(k), 3);
}

TEST(CudaCodegen, EmulatedKernelsOfEveryElementwiseOpMatchTheEagerKernels) {
  REQUIRE_TOOLKIT();
  cpu::kernels::register_kernels();
  cpu::codegen::testing::ElementwiseOpCases all = cpu::codegen::testing::every_elementwise_op_case();
  std::vector<FusedKernelSpec> specs;
  for (size_t i = 0; i < all.cases.size(); ++i)
    specs.push_back(spec_of(all.cases[i].c, "op_" + std::to_string(i)));
  std::unique_ptr<EmulatedKernels> kernels = emulate_on_cpu(specs);
  for (size_t i = 0; i < all.cases.size(); ++i) {
    const cpu::codegen::testing::OpCase& oc = all.cases[i];
    // Three blocks: each element is reached by exactly one of them through the grid stride.
    check_emulated(*kernels, specs[i].name, oc.c, oc.inputs, {oc.want}, oc.want.sizes(), 3,
                   std::max(oc.tol.rtol, 1e-6), oc.tol.atol, oc.label);
  }
}

TEST(CudaCodegen, EmulatedBroadcastsDynamicDimsAndSeveralOutputs) {
  REQUIRE_TOOLKIT();
  cpu::kernels::register_kernels();
  Case c = parse_case(R"(graph g {
  input %0 "x": float64[s0, 3, s1]
  input %1 "w": float64[s0, 1, s1]
  input %2 "b": float64[s1]
  %3, %4: float64[s0, 3, s1], bool[s0, 3, s1] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%5: float64[s0, 3, s1], %6: float64[s0, 1, s1], %7: float64[s1]) {
      %8: float64[s0, 3, s1] = mul(%5, %6) {}
      %9: float64[s0, 3, s1] = add(%8, %7) {}
      %10: float64[s0, 3, s1] = tanh(%9) {}
      %11: bool[s0, 3, s1] = gt(%10, %5) {}
      yield %10, %11
    }
  }
  return %3, %4
})");
  FusedKernelSpec spec = spec_of(c, "fused_0");
  std::unique_ptr<EmulatedKernels> kernels = emulate_on_cpu({&spec, 1});
  std::vector<Tensor> inputs = {random_normal({4, 3, 7}, DType::Float64, 1),
                                random_normal({4, 1, 7}, DType::Float64, 2),
                                random_normal({7}, DType::Float64, 3)};
  std::vector<Tensor> want = interp::Executable(c.graph).run(inputs);
  for (int64_t blocks : {1, 5, 200})  // fewer, more and many more blocks than elements / 1
    check_emulated(*kernels, "fused_0", c, inputs, want, {4, 3, 7}, blocks, 1e-15, 0,
                   "blocks " + std::to_string(blocks));
}

TEST(CudaCodegen, EmulatedVectorLoopTailAndMisalignedBuffersMatchTheReference) {
  REQUIRE_TOOLKIT();
  cpu::kernels::register_kernels();
  // float32 and int64 inputs, float32 and bool outputs: vectors of 16, 32 and 4 bytes meet;
  // 1003 elements leave a tail of 3.
  Case c = parse_case(R"(graph g {
  input %0 "x": float32[1003]
  input %1 "a": float32[]
  input %2 "y": int64[1003]
  %3, %4: float32[1003], bool[1003] = fused(%0, %1, %2) {kind="elementwise"} {
    region (%5: float32[1003], %6: float32[], %7: int64[1003]) {
      %8: float32[1003] = mul(%5, %6) {}
      %9: float32[1003] = cast(%7) {dtype=float32}
      %10: float32[1003] = add(%8, %9) {}
      %11: bool[1003] = gt(%10, %5) {}
      yield %10, %11
    }
  }
  return %3, %4
})");
  FusedKernelSpec spec = spec_of(c, "fused_0");
  ASSERT_EQ(spec.dims.size(), 1u);
  std::unique_ptr<EmulatedKernels> kernels = emulate_on_cpu({&spec, 1});
  std::vector<Tensor> inputs = {random_normal({1003}, DType::Float32, 30),
                                random_normal({}, DType::Float32, 31),
                                random_normal({1003}, DType::Int64, 32)};
  std::vector<Tensor> want = interp::Executable(c.graph).run(inputs);
  for (int64_t blocks : {1, 7})
    check_emulated(*kernels, "fused_0", c, inputs, want, {1003}, blocks, 0, 0,
                   "aligned, blocks " + std::to_string(blocks));
  // The same data one element into larger buffers: no longer aligned to a vector, the
  // kernel takes the scalar loop.
  Tensor x = random_normal({1004}, DType::Float32, 33), y = random_normal({1004}, DType::Int64, 34);
  Tensor out = Tensor::empty({1004}, DType::Float32), flag = Tensor::empty({1004}, DType::Bool);
  const std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
  std::vector<Tensor> shifted_in = {
      cpu::codegen::testing::make_tensor(DType::Float32, {1003}, {xs.begin() + 1, xs.end()}),
      inputs[1],
      cpu::codegen::testing::make_tensor(DType::Int64, {1003}, {ys.begin() + 1, ys.end()})};
  std::vector<Tensor> shifted_want = interp::Executable(c.graph).run(shifted_in);
  std::vector<void*> buffers = {static_cast<float*>(x.raw_data()) + 1, inputs[1].raw_data(),
                                static_cast<int64_t*>(y.raw_data()) + 1,
                                static_cast<float*>(out.raw_data()) + 1,
                                static_cast<bool*>(flag.raw_data()) + 1};
  const std::vector<int64_t> dims = {1003};
  kernels->run("fused_0", buffers, dims, 3);
  const std::vector<double> got = out.to_vector<double>(), got_flag = flag.to_vector<double>();
  const std::vector<double> w = shifted_want[0].to_vector<double>(),
                            w_flag = shifted_want[1].to_vector<double>();
  for (size_t i = 0; i < 1003; ++i) {
    ASSERT_EQ(got[i + 1], w[i]) << "misaligned, element " << i;
    ASSERT_EQ(got_flag[i + 1], w_flag[i]) << "misaligned, element " << i;
  }
}

TEST(CudaCodegen, EmulatedRowKernelsMatchTheReference) {
  REQUIRE_TOOLKIT();
  cpu::kernels::register_kernels();
  struct RowCase {
    Case c;
    std::vector<Tensor> inputs;
    Shape iteration;
  };
  std::vector<RowCase> cases;
  cases.push_back({parse_case(softmax_ir("s0", "37", "float32")),
                   {random_normal({9, 37}, DType::Float32, 4)},
                   {9, 37}});
  cases.push_back({parse_case(softmax_ir("6", "300", "float64")),
                   {random_normal({6, 300}, DType::Float64, 5)},
                   {6, 300}});
  cases.push_back({parse_case(R"(graph g {
  input %0 "x": float32[3, 5, 100]
  input %1 "w": float32[3, 1, 100]
  %2, %3, %4: float32[3, 5, 1], float32[3, 5, 1], float32[3, 5, 100] = fused(%0, %1) {kind="row"} {
    region (%5: float32[3, 5, 100], %6: float32[3, 1, 100]) {
      %7: float32[3, 5, 100] = mul(%5, %6) {}
      %8: float32[3, 5, 100] = relu(%7) {}
      %9: float32[3, 5, 1] = sum(%8) {dims=[2], keepdim=true}
      %10: float32[3, 5, 1] = amin(%5) {dims=[2], keepdim=true}
      %11: float32[3, 5, 100] = sub(%7, %10) {}
      yield %9, %10, %11
    }
  }
  return %2, %3, %4
})"),
                   {random_normal({3, 5, 100}, DType::Float32, 6),
                    random_normal({3, 1, 100}, DType::Float32, 7)},
                   {3, 5, 100}});
  // A NaN in a row: its max, sum and softmax are NaN, the other rows are not touched.
  static_cast<float*>(cases[0].inputs[0].raw_data())[37 * 4 + 11] =
      std::numeric_limits<float>::quiet_NaN();
  std::vector<FusedKernelSpec> specs;
  for (size_t i = 0; i < cases.size(); ++i)
    specs.push_back(spec_of(cases[i].c, "row_" + std::to_string(i)));
  std::unique_ptr<EmulatedKernels> kernels = emulate_on_cpu(specs);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<Tensor> want = interp::Executable(cases[i].c.graph).run(cases[i].inputs);
    for (int64_t blocks : {1, 4})
      check_emulated(*kernels, specs[i].name, cases[i].c, cases[i].inputs, want,
                     cases[i].iteration, blocks, 1e-5, 1e-6,
                     specs[i].name + " blocks " + std::to_string(blocks));
  }
}

TEST(CudaCodegen, EmulatedKernelsRejectWrongCalls) {
  REQUIRE_TOOLKIT();
  Case c = parse_case(cpu::codegen::testing::kFiveOpKernel);
  FusedKernelSpec spec = spec_of(c, "fused_0");
  std::unique_ptr<EmulatedKernels> kernels = emulate_on_cpu({&spec, 1});
  std::vector<void*> two(2, nullptr);
  const std::vector<int64_t> dims = {4};
  expect_error([&] { kernels->run("fused_1", two, dims, 1); },
               {"expected an emulated kernel named 'fused_1'"});
  expect_error([&] { kernels->run("fused_0", two, dims, 1); },
               {"emulated kernel 'fused_0': expected 6 buffers and 1 dims, found 2 and 1"});
  std::vector<void*> six(6, nullptr);
  expect_error([&] { kernels->run("fused_0", six, dims, 0); },
               {"expected at least one block, found 0"});
}

// ---- the bundle tests/gpu/device_check.sh runs on a GPU ----

// What the GPU's results may differ by from the CPU's: libdevice's functions (within 2 ulp),
// FMA contraction (NVPTX fuses a * b + c, the eager kernels do not) and sums in another order.
// A wrong offset, broadcast or reduction is far outside these.
void gpu_tolerance(DType t, double& rtol, double& atol) {
  if (t == DType::Float32) rtol = std::max(rtol, 1e-5), atol = std::max(atol, 1e-5);
  if (t == DType::Float64) rtol = std::max(rtol, 1e-12), atol = std::max(atol, 1e-12);
}

TEST(CudaCodegen, WritesTheGpuKernelBundle) {
  REQUIRE_TOOLKIT();
  cpu::kernels::register_kernels();
  struct Entry {
    Case c;
    FusedKernelSpec spec;
    std::vector<Tensor> inputs, want;
    Shape iteration;
    double rtol = 0, atol = 0;
  };
  std::vector<Entry> entries;
  auto add = [&](Case c, std::vector<Tensor> inputs, Shape iteration, double rtol, double atol) {
    Entry e{c, spec_of(c, "k" + std::to_string(entries.size())), inputs,
            interp::Executable(c.graph).run(inputs), iteration, rtol, atol};
    for (const Tensor& w : e.want) gpu_tolerance(w.dtype(), e.rtol, e.atol);
    entries.push_back(std::move(e));
  };
  for (const cpu::codegen::testing::OpCase& oc : cpu::codegen::testing::every_elementwise_op_case().cases)
    add(oc.c, oc.inputs, oc.want.sizes(), oc.tol.rtol, oc.tol.atol);
  // Many blocks through the grid-stride loop, a 3-D broadcast, rows of 4096 and of 37 with a
  // NaN, and layer_norm's statistics.
  const std::string chain = "k" + std::to_string(entries.size());  // timed on the GPU too
  add(parse_case(cpu::codegen::testing::kFiveOpKernel),
      {random_normal({300000}, DType::Float32, 11), random_normal({}, DType::Float32, 12),
       random_normal({}, DType::Float32, 13), random_normal({}, DType::Float32, 14),
       random_normal({}, DType::Float32, 15)},
      {300000}, 0, 0);
  Case broadcast = parse_case(R"(graph g {
  input %0 "x": float32[40, 3, 70]
  input %1 "w": float32[40, 1, 70]
  %2: float32[40, 3, 70] = fused(%0, %1) {kind="elementwise"} {
    region (%3: float32[40, 3, 70], %4: float32[40, 1, 70]) {
      %5: float32[40, 3, 70] = mul(%3, %4) {}
      yield %5
    }
  }
  return %2
})");
  add(broadcast, {random_normal({40, 3, 70}, DType::Float32, 16), random_normal({40, 1, 70}, DType::Float32, 17)},
      {40, 3, 70}, 0, 0);
  add(parse_case(softmax_ir("32", "4096", "float32")), {random_normal({32, 4096}, DType::Float32, 18)},
      {32, 4096}, 1e-5, 1e-7);
  Tensor with_nan = random_normal({9, 37}, DType::Float32, 19);
  static_cast<float*>(with_nan.raw_data())[37 * 4 + 11] = std::numeric_limits<float>::quiet_NaN();
  add(parse_case(softmax_ir("9", "37", "float64")), {random_normal({9, 37}, DType::Float64, 20)},
      {9, 37}, 1e-12, 1e-15);
  add(parse_case(softmax_ir("s0", "37", "float32")), {with_nan}, {9, 37}, 1e-5, 1e-7);
  Tensor n = Tensor::empty({}, DType::Float32), eps = Tensor::empty({}, DType::Float32);
  *static_cast<float*>(n.raw_data()) = 96;
  *static_cast<float*>(eps.raw_data()) = 1e-5f;
  add(parse_case(cpu::codegen::testing::kLayerNormRows),
      {random_normal({33, 96}, DType::Float32, 21), random_normal({96}, DType::Float32, 22),
       random_normal({96}, DType::Float32, 23), n, eps},
      {33, 96}, 1e-4, 1e-4);
  add(parse_case(cpu::codegen::testing::kReductions3d),
      {random_normal({3, 5, 1000}, DType::Float32, 24), random_normal({3, 1, 1000}, DType::Float32, 25)},
      {3, 5, 1000}, 1e-4, 1e-4);

  std::vector<FusedKernelSpec> specs;
  for (const Entry& e : entries) specs.push_back(e.spec);
  PtxModule module = compile_ptx(specs);
  NamedTensors tensors;
  std::string lines;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& e = entries[k];
    cuda::testing::BundledKernel bundled{module.kernel(e.spec.name),
                                         runtime_dims(*e.c.fused, e.iteration), e.inputs.size(),
                                         e.rtol, e.atol};
    ASSERT_EQ(bundled.info.buffers, e.inputs.size() + e.want.size());
    lines += cuda::testing::bundle_line(bundled);
    for (size_t i = 0; i < e.inputs.size(); ++i)
      tensors.emplace_back(e.spec.name + ".in" + std::to_string(i), e.inputs[i]);
    for (size_t o = 0; o < e.want.size(); ++o)
      tensors.emplace_back(e.spec.name + ".out" + std::to_string(o), e.want[o]);
  }
  const char* requested = std::getenv("KILN_GPU_KERNEL_BUNDLE");
  std::string path = requested && *requested
                         ? requested
                         : (std::filesystem::temp_directory_path() /
                            ("kiln-gpu-bundle-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  save_safetensors(path, tensors,
                   {{"ptx", module.ptx}, {"chip", module.chip}, {"kernels", lines},
                    {"chain", chain}});
  // What the GPU side reads back: every kernel line, and the tensors they name.
  SafetensorsFile back = load_safetensors(path);
  std::vector<cuda::testing::BundledKernel> parsed =
      cuda::testing::parse_bundle_lines(back.metadata.at("kernels"));
  ASSERT_EQ(parsed.size(), entries.size());
  EXPECT_EQ(parsed.back().dims, runtime_dims(*entries.back().c.fused, entries.back().iteration));
  EXPECT_EQ(parsed.back().info.kind, FusedKernelKind::Rows);
  EXPECT_EQ(back.metadata.at("ptx"), module.ptx);
  EXPECT_EQ(back.tensors.size(), tensors.size());
  std::printf("[cuda codegen] GPU kernel bundle: %zu kernels, %zu tensors, %.1f MiB at %s\n",
              entries.size(), tensors.size(),
              static_cast<double>(std::filesystem::file_size(path)) / (1 << 20), path.c_str());
  if (!(requested && *requested)) std::filesystem::remove(path);
}

// ---- errors ----

TEST(CudaCodegen, SpecErrorsNameTheGeneratorKernelAndOp) {
  REQUIRE_TOOLKIT();
  // (Built directly: float16 arithmetic does not even verify.)
  Case c = build_case({type(DType::Float16, {8})}, {type(DType::Float32, {8})},
                      [](ir::Graph& r, std::vector<ir::Value*> a) {
                        ops::CastAttrs to_f32;
                        return std::vector<ir::Value*>{
                            r.add_node(ops::cast, to_f32, {a[0]}, {type(DType::Float32, {8})})
                                ->outputs[0]};
                      });
  FusedKernelSpec spec = spec_of(c, "half_0");
  expect_error([&] { compile_ptx({&spec, 1}); },
               {"[cuda codegen] kernel 'half_0': region input 0 has dtype float16; expected "
                "float32, float64, int32, int64 or bool",
                "Fix: leave it out of the fusion group"});
  Case ok = parse_case(cpu::codegen::testing::kFiveOpKernel);
  std::vector<FusedKernelSpec> twice = {spec_of(ok, "k"), spec_of(ok, "k")};
  expect_error([&] { compile_ptx(twice); },
               {"[cuda codegen] expected unique kernel names, found 'k' twice"});
}

TEST(CudaCodegen, ModuleLookupNamesTheKernelsItHas) {
  REQUIRE_TOOLKIT();
  Case c = parse_case(cpu::codegen::testing::kFiveOpKernel);
  FusedKernelSpec spec = spec_of(c, "fused_0");
  PtxModule m = compile_ptx({&spec, 1});
  EXPECT_EQ(m.kernel("fused_0").buffers, 6u);
  expect_error([&] { m.kernel("fused_9"); },
               {"expected a kernel named 'fused_9' in the PTX module, found only: fused_0"});
}

TEST(CudaCodegen, BadChipAndMissingLibdeviceAreReported) {
  REQUIRE_TOOLKIT();
  Case c = parse_case(cpu::codegen::testing::kFiveOpKernel);
  FusedKernelSpec spec = spec_of(c, "fused_0");
  PtxOptions chip;
  chip.chip = "hopper";
  expect_error([&] { compile_ptx({&spec, 1}, chip); },
               {"expected a chip of the form sm_<compute capability> (sm_90 for H100/H200), "
                "found 'hopper'"});
  PtxOptions libdevice;
  libdevice.libdevice = "/nonexistent/libdevice.10.bc";
  expect_error([&] { compile_ptx({&spec, 1}, libdevice); },
               {"expected libdevice's bitcode at '/nonexistent/libdevice.10.bc', found no such "
                "file"});
  // KILN_CUDA_HOME, when set, is the only toolkit root looked at.
  EnvVar no_libdevice("KILN_LIBDEVICE", nullptr);
  EnvVar no_toolkit("KILN_CUDA_HOME", "/nonexistent-cuda");
  EXPECT_EQ(toolkit_root(), "");
  expect_error([] { find_libdevice(); },
               {"expected libdevice (the CUDA toolkit's math functions, libdevice.10.bc)",
                "/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc",
                "Fix: install the CUDA toolkit, or set KILN_CUDA_HOME"});
}

TEST(CudaCodegen, PtxasRejectionsCarryItsMessages) {
  REQUIRE_TOOLKIT();
  expect_error(
      [] { assemble_cubin(".version 7.8\n.target sm_90\n.address_size 64\nnot ptx\n", "sm_90"); },
      {"[cuda codegen] expected ptxas to assemble the PTX for sm_90, got exit status",
       "syntax error"});
  EnvVar no_ptxas("KILN_PTXAS", "/nonexistent/ptxas");
  EXPECT_EQ(find_ptxas(), "");
  expect_error([] { assemble_cubin("", "sm_90"); },
               {"expected ptxas (the CUDA toolkit's PTX assembler) to assemble PTX for sm_90, "
                "found none"});
}

}  // namespace
}  // namespace kiln::cuda::codegen
