// The eager CUDA elementwise kernels, checked without a GPU. Every op with a scalar body, on
// every dtype it accepts and with its attribute variants, in dense, broadcast, one-element and
// strided layouts, becomes one kernel; all of them are
//   - compiled by NVRTC for sm_90 and assembled by ptxas (what the GPU would load), and
//   - compiled on the host with a host prelude (cuda/generated_kernels.h) and run on CPU
//     tensors, against the eager CPU kernels: the plan, the index arithmetic, the loads and
//     stores and each op's C all run as the GPU would run them.
// On a GPU, tests/cuda/tensor_test.cpp runs them for real.
#include "kiln/cuda/elementwise_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/elementwise.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

namespace fs = std::filesystem;

// ---- planning ----

TEST(CudaElementwisePlan, SameShapedContiguousInputsAreReadAtTheFlatIndex) {
  Tensor a = zeros({4, 5}), b = zeros({4, 5});
  ElementwisePlan plan = plan_elementwise(std::vector<Tensor>{a, b}, {4, 5});
  EXPECT_EQ(plan.numel, 20);
  EXPECT_EQ(plan.rank, 0);
  EXPECT_EQ(plan.access, (std::vector<InputAccess>{InputAccess::Dense, InputAccess::Dense}));
}

TEST(CudaElementwisePlan, ABroadcastBiasIsStridedOverTheMergedDims) {
  Tensor x = zeros({2, 3, 4}), bias = zeros({4}), scale = Tensor::scalar(2.0);
  ElementwisePlan plan = plan_elementwise(std::vector<Tensor>{x, bias, scale}, {2, 3, 4});
  // [2, 3] merge (every input steps over them as over one dim); [.., 4] stays apart.
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.sizes[0], 6);
  EXPECT_EQ(plan.sizes[1], 4);
  EXPECT_EQ(plan.access, (std::vector<InputAccess>{InputAccess::Dense, InputAccess::Strided,
                                                   InputAccess::Single}));
  EXPECT_EQ(plan.strides[1][0], 0);
  EXPECT_EQ(plan.strides[1][1], 1);
}

TEST(CudaElementwisePlan, ViewsKeepTheirStridesAndSizeOneDimsDropOut) {
  Tensor base = zeros({4, 6});
  Tensor columns = base.slice(1, 1, 4);  // [4, 3] with strides [6, 1]
  ElementwisePlan plan = plan_elementwise(std::vector<Tensor>{columns}, {4, 3});
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.access[0], InputAccess::Strided);
  EXPECT_EQ(plan.strides[0][0], 6);
  EXPECT_EQ(plan.strides[0][1], 1);
  Tensor transposed = zeros({1, 3, 1, 5}).transpose(1, 3);  // [1, 5, 1, 3]
  plan = plan_elementwise(std::vector<Tensor>{transposed}, {1, 5, 1, 3});
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.sizes[0], 5);
  EXPECT_EQ(plan.sizes[1], 3);
}

TEST(CudaElementwisePlan, HostScalarsBesideDeviceTensorsArePassedByValue) {
  Tensor x = zeros({2, 3}), two = Tensor::scalar(2.0);
  ElementwisePlan plan = plan_elementwise(std::vector<Tensor>{x, two}, {2, 3});
  EXPECT_EQ(plan.access[1], InputAccess::Single);
  // On the CPU both are where the kernel runs: nothing changes.
  read_host_scalars_by_value(plan, std::vector<Tensor>{x, two}, kCPU);
  EXPECT_EQ(plan.access[1], InputAccess::Single);
  // Planned for a GPU, the tensors there keep their reads, the host scalar becomes a parameter,
  // and a host tensor that is no scalar is refused. (x's memory stands for a GPU's: planning
  // reads none.)
  const Device gpu(DeviceType::CUDA, 0);
  Tensor on_gpu[] = {Tensor::from_blob(x.raw_data(), {2, 3}, kFloat32, {}, {}, gpu), two};
  read_host_scalars_by_value(plan, on_gpu, gpu);
  EXPECT_EQ(plan.access, (std::vector<InputAccess>{InputAccess::Dense, InputAccess::Value}));
  Tensor host_matrix[] = {on_gpu[0], zeros({2, 3})};
  expect_error([&] { read_host_scalars_by_value(plan, host_matrix, gpu); },
               {"reads other devices' tensors only when they are 0-d scalars", "float32[2, 3] on cpu",
                "Fix: move it with .to(cuda:0)"});
}

TEST(CudaElementwisePlan, AViewOfAnOutputIsWrittenThroughItsStrides) {
  Tensor base = zeros({4, 6}), x = zeros({4, 3});
  Tensor columns = base.slice(1, 1, 4);  // [4, 3] with strides [6, 1]
  ElementwisePlan plan = plan_elementwise(std::vector<Tensor>{x}, columns.sizes(), columns.strides());
  EXPECT_TRUE(plan.output_strided);
  EXPECT_EQ(plan.access[0], InputAccess::Dense);
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.output_strides[0], 6);
  EXPECT_EQ(plan.output_strides[1], 1);
  // A contiguous output, given or not, is written at the flat index; whole rows merge.
  plan = plan_elementwise(std::vector<Tensor>{x}, {4, 3}, {3, 1});
  EXPECT_FALSE(plan.output_strided);
  EXPECT_EQ(plan.rank, 0);
  Tensor rows = base.slice(0, 1, 3);  // [2, 6]: contiguous rows of base
  plan = plan_elementwise(std::vector<Tensor>{zeros({2, 6})}, rows.sizes(), rows.strides());
  EXPECT_FALSE(plan.output_strided);
}

TEST(CudaElementwisePlan, TooManyDimsThatCannotMergeAreRefused) {
  // A 9-D tensor with its dims reversed: its strides grow inward, so no two dims merge.
  Tensor x = zeros({2, 2, 2, 2, 2, 2, 2, 2, 2}).permute({8, 7, 6, 5, 4, 3, 2, 1, 0});
  Shape out(x.sizes());
  expect_error([&] { plan_elementwise(std::vector<Tensor>{x}, out); },
               {"[cuda] expected an elementwise op's operands to need at most 8 dims",
                "found 9", "Fix: make the strided inputs contiguous first"});
}

// ---- every kernel ----

// One generated kernel and the CPU tensors it runs on.
struct KernelCase {
  std::string name;
  const OpDef* op;
  std::unique_ptr<Attrs> attrs;
  std::vector<Tensor> inputs;
  Tensor expected;  // the eager CPU kernel's result
  ElementwisePlan plan;
  bool transposed_output = false;  // written into the transpose of a contiguous tensor
};

// Values that reach the corners of each dtype's arithmetic (NaN, infinities, signed zero,
// halves for rounding, negative integers, large ones that wrap when multiplied).
Tensor values(DType dtype, IntList sizes, int seed) {
  static const std::vector<double> floats = {-3.5, -1,  -0.5, -0.0, 0,   0.25, 0.5,  1,
                                             1.5,  2.5, 3,    7.25, 100, -40,  NAN,  INFINITY,
                                             -INFINITY, 1e-3, 0.75, -2.5, 1e4,  -7};
  static const std::vector<double> ints = {-7, -1, 0, 1, 2, 3, 5, 100, -100, 46341, -46341, 12};
  std::vector<double> v(static_cast<size_t>(numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t k = (i * 7 + static_cast<size_t>(seed) * 5) % 97;
    if (dtype == kBool)
      v[i] = (k % 3) == 0;
    else if (is_floating(dtype))
      v[i] = floats[k % floats.size()];
    else
      v[i] = ints[k % ints.size()];
  }
  return Tensor::from_vector(v, sizes).to(dtype);
}

// The attribute variants an op's kernels are made with.
std::vector<std::unique_ptr<Attrs>> attr_variants(const OpDef& op) {
  std::vector<std::unique_ptr<Attrs>> out;
  auto add = [&](auto attrs) { out.push_back(std::make_unique<decltype(attrs)>(attrs)); };
  if (&op == &ops::gelu) {
    add(ops::GeluAttrs{});
    ops::GeluAttrs tanh;
    tanh.tanh_approximation = true;
    add(tanh);
  } else if (&op == &ops::clamp) {
    ops::ClampAttrs both, low;
    both.min = -1, both.max = 2;
    low.min = 0.5;
    add(both), add(low);
  } else if (&op == &ops::pow_scalar) {
    for (double e : {2.0, 0.5, -1.5}) {
      ops::PowScalarAttrs a;
      a.exponent = e;
      add(a);
    }
  } else if (&op == &ops::cast) {
    for (DType to : {kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
      ops::CastAttrs a;
      a.dtype = to;
      add(a);
    }
  } else {
    out.push_back(op.attrs_prototype->clone());
  }
  return out;
}

// The eager CPU result, or nothing when the op refuses these inputs (a dtype it does not take).
std::optional<Tensor> cpu_result(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  try {
    return dispatch(op, inputs, attrs)[0];
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Every kernel: op x attribute variant x input dtype x layout.
std::vector<KernelCase> every_kernel() {
  init();
  std::vector<KernelCase> cases;
  const std::vector<DType> dtypes = {kBool, kInt32, kInt64, kFloat32, kFloat64, kFloat16, kBFloat16};
  for (OpDef* op : all_ops()) {
    if (op->lowering != LoweringClass::Elementwise || !op->scalar_body) continue;
    const size_t arity = op->input_names.size();
    for (auto& attrs : attr_variants(*op)) {
      for (DType dtype : dtypes) {
        // Layouts: dense; the last input broadcast along rows; the last input one element;
        // the first input a transposed view; the last input a host scalar (by value); the
        // output a transposed view (two dtypes suffice for the store's addressing).
        for (int layout = 0; layout < 6; ++layout) {
          if (layout == 5 && dtype != kFloat32 && dtype != kInt64) continue;
          std::vector<Tensor> inputs;
          for (size_t k = 0; k < arity; ++k) {
            const DType t = (op == &ops::where && k == 0) ? kBool : dtype;
            const bool last = k + 1 == arity;
            if (layout == 1 && last && arity > 1)
              inputs.push_back(values(t, {13}, static_cast<int>(k)));
            else if ((layout == 2 || layout == 4) && last && arity > 1)
              inputs.push_back(values(t, {}, static_cast<int>(k)));
            else if (layout == 3 && k == 0)
              inputs.push_back(values(t, {13, 3}, static_cast<int>(k)).transpose(0, 1));
            else
              inputs.push_back(values(t, {3, 13}, static_cast<int>(k)));
          }
          if ((layout == 1 || layout == 2 || layout == 4) && arity < 2) continue;
          std::optional<Tensor> expected = cpu_result(*op, inputs, *attrs);
          if (!expected) continue;
          KernelCase c;
          c.name = op->name + "_" + std::to_string(cases.size());
          c.op = op;
          c.attrs = attrs->clone();
          c.inputs = inputs;
          c.expected = *expected;
          c.transposed_output = layout == 5;
          const Tensor out_view = Tensor::empty({13, 3}, expected->dtype()).t();
          c.plan = c.transposed_output ? plan_elementwise(inputs, expected->sizes(), out_view.strides())
                                       : plan_elementwise(inputs, expected->sizes());
          if (layout == 4) c.plan.access.back() = InputAccess::Value;
          c.plan.output_aliases_input = cases.size() % 5 == 0;  // in-place kernels' source too
          cases.push_back(std::move(c));
        }
      }
    }
  }
  return cases;
}

std::string source_of(const KernelCase& c) {
  std::vector<DType> dtypes;
  for (const Tensor& t : c.inputs) dtypes.push_back(t.dtype());
  return elementwise_kernel_source(*c.op, *c.attrs, dtypes, c.expected.dtype(), c.plan, c.name);
}

bool reads_a_value(const KernelCase& c) {
  return std::find(c.plan.access.begin(), c.plan.access.end(), InputAccess::Value) != c.plan.access.end();
}

// How the kernels store each dtype (a by-value parameter's C type).
const char* stored_as(DType dtype) {
  switch (dtype) {
    case kBool:
      return "unsigned char";
    case kInt32:
      return "int";
    case kInt64:
      return "long long";
    case kFloat32:
      return "float";
    case kFloat64:
      return "double";
    default:
      return "unsigned short";  // float16, bfloat16
  }
}

// For a kernel that takes values, `<name>_by_pointer` taking every input by pointer, so the
// host test calls every kernel alike.
std::string by_pointer_wrapper(const KernelCase& c) {
  std::string params, args;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const std::string in = "in" + std::to_string(k);
    params += "const void* " + in + ", ";
    const std::string type = stored_as(c.inputs[k].dtype());
    args += c.plan.access[k] == InputAccess::Value ? "*(const " + type + "*)" + in
                                                   : "(const " + type + "*)" + in;
    args += ", ";
  }
  return "extern \"C\" void " + c.name + "_by_pointer(" + params +
         "void* out, long long n, KilnDims dims) {\n  " + c.name + "(" + args + "(" +
         stored_as(c.expected.dtype()) + "*)out, n, dims);\n}\n";
}

std::string all_sources(const std::vector<KernelCase>& cases) {
  std::string out;
  for (const KernelCase& c : cases) out += source_of(c);
  return out;
}

TEST(CudaElementwiseKernels, EveryOpOnEveryDtypeAndLayoutMakesAKernel) {
  const std::vector<KernelCase> cases = every_kernel();
  std::set<std::string> ops_covered;
  for (const KernelCase& c : cases) ops_covered.insert(c.op->name);
  for (OpDef* op : all_ops()) {
    if (op->lowering != LoweringClass::Elementwise || !op->scalar_body) continue;
    EXPECT_TRUE(ops_covered.count(op->name)) << op->name << " made no kernel";
  }
  EXPECT_GT(cases.size(), 300u);
  // Every elementwise op has its CUDA kernel slot filled.
  for (OpDef* op : all_ops()) {
    if (op->lowering != LoweringClass::Elementwise || !op->scalar_body) continue;
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  }
}

TEST(CudaElementwiseKernels, NvrtcCompilesTheKernelsAndPtxasAssemblesThem) {
  // Every op, attribute variant and dtype once (its first layout), and every layout of the
  // ops with three inputs: the host test below runs them all; NVRTC takes ~40 ms a kernel.
  std::vector<KernelCase> cases;
  std::set<std::string> seen;
  for (KernelCase& c : every_kernel()) {
    std::string kind = c.op->name + c.attrs->str() + c.inputs[0].type_str().substr(0, 4);
    const bool value_case = reads_a_value(c) && (c.expected.dtype() == kFloat32 || c.inputs[0].dtype() == kFloat16);
    const bool strided_store = c.transposed_output && c.expected.dtype() == kFloat32;
    if (seen.insert(kind).second || c.inputs.size() == 3 || value_case || strided_store)
      cases.push_back(std::move(c));
  }
  std::vector<std::string> names;
  for (const KernelCase& c : cases) names.push_back(c.name);
  const std::string skipped = expect_gpu_toolchain_accepts(all_sources(cases), names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

// Runs kernel `c` from `library` on its CPU inputs, as the GPU would with the same arguments.
Tensor run_on_host(void* library, const KernelCase& c) {
  Tensor out = c.transposed_output ? Tensor::empty({13, 3}, c.expected.dtype()).t()
                                   : Tensor::empty(c.expected.sizes(), c.expected.dtype());
  void* entry = dlsym(library, (reads_a_value(c) ? c.name + "_by_pointer" : c.name).c_str());
  EXPECT_NE(entry, nullptr) << c.name;
  if (!entry) return out;
  std::vector<const void*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.raw_data());
  const long long n = c.plan.numel;
  const KernelDims dims = kernel_dims(c.plan);
  switch (in.size()) {
    case 1:
      reinterpret_cast<void (*)(const void*, void*, long long, KernelDims)>(entry)(
          in[0], out.raw_data(), n, dims);
      break;
    case 2:
      reinterpret_cast<void (*)(const void*, const void*, void*, long long, KernelDims)>(entry)(
          in[0], in[1], out.raw_data(), n, dims);
      break;
    case 3:
      reinterpret_cast<void (*)(const void*, const void*, const void*, void*, long long, KernelDims)>(
          entry)(in[0], in[1], in[2], out.raw_data(), n, dims);
      break;
    default:
      ADD_FAILURE() << c.name << ": " << in.size() << " inputs";
  }
  return out;
}

TEST(CudaElementwiseKernels, EveryKernelComputesWhatTheCpuKernelDoes) {
  if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<KernelCase> cases = every_kernel();
  const fs::path dir = scratch_dir("cuda_elementwise");
  std::string sources = all_sources(cases);
  for (const KernelCase& c : cases)
    if (reads_a_value(c)) sources += by_pointer_wrapper(c);
  std::shared_ptr<void> library = build_on_host(sources, dir);
  ASSERT_TRUE(library);
  for (const KernelCase& c : cases) {
    const Tensor got = run_on_host(library.get(), c);
    // The eager CPU kernels of approximate ops use vectorized math (Eigen); the kernels use
    // the C library's on the host and libdevice's on the GPU, each within a few ulp.
    const bool approximate = c.op->numerics == Numerics::Approximate;
    const bool single = c.expected.dtype() != kFloat64;
    // Composites (binary_cross_entropy_with_logits: a sum of terms that cancel) lose a few
    // more bits.
    const double rtol = approximate ? (single ? 2e-5 : 1e-13) : 0;
    const double atol = approximate ? (single ? 2e-6 : 1e-15) : 0;
    count_mismatches(got.to_vector<double>(), c.expected.to_vector<double>(), rtol, atol,
                     c.name + " " + c.op->name + c.attrs->str() + " on " +
                         c.inputs[0].type_str());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::cuda
