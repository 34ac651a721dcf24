// The eager CUDA reduction kernels (sum, prod, amax, amin, all, any, and the row kernels of
// softmax and log_softmax), checked without a GPU as
// the elementwise ones are (cuda/generated_kernels.h): every op on every dtype it takes, over
// single dims, several dims, all dims and none, on contiguous, transposed and sliced inputs,
// compiled by NVRTC and ptxas, and run on the host against the CPU kernels. The host runs one
// thread per block, so the warp shuffles and shared memory of the block step wait for
// tests/gpu/device_check.sh.
#include "kiln/cuda/reduction_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/cuda/softmax_kernels.h"
#include "kiln/cuda/statistic_kernels.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/softmax.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

TEST(CudaReductionPlan, KeptAndReducedDimsMergeWhereTheStridesAllow) {
  Tensor x = zeros({2, 3, 4, 5});
  ReductionPlan plan = plan_reduction(x, 0b1100);  // sum over the last two dims
  EXPECT_EQ(plan.outputs, 6);
  EXPECT_EQ(plan.reduced, 20);
  EXPECT_EQ(plan.kept_rank, 1);
  EXPECT_EQ(plan.kept_strides[0], 20);
  EXPECT_EQ(plan.reduced_rank, 1);
  EXPECT_EQ(plan.reduced_strides[0], 1);
  plan = plan_reduction(x, 0b0101);  // dims 0 and 2: nothing merges
  EXPECT_EQ(plan.kept_rank, 2);
  EXPECT_EQ(plan.reduced_rank, 2);
  EXPECT_EQ(plan.reduced_strides[0], 60);
  EXPECT_EQ(plan.reduced_strides[1], 5);
  plan = plan_reduction(x.transpose(0, 3), 0b0001);  // a column of a transposed view
  EXPECT_EQ(plan.reduced_strides[0], 1);
  EXPECT_EQ(plan.reduced, 5);
}

struct ReductionCase {
  std::string name;
  ReductionKind kind;
  const OpDef* op;
  ops::ReduceAttrs attrs;
  Tensor input, expected;
  ReductionPlan plan;
};

Tensor sample(DType dtype, IntList sizes, int seed) {
  static const std::vector<double> floats = {-3.5, 2, 0.25, -0.5, 1.5, 7, -1, 0.75, 3, -2.25, 1};
  static const std::vector<double> ints = {-3, 2, 1, 5, -1, 7, 0, 4, -6, 3, 1};
  std::vector<double> v(static_cast<size_t>(numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t k = (i * 5 + static_cast<size_t>(seed)) % 11;
    v[i] = dtype == kBool ? (k % 4 != 0) : is_floating(dtype) ? floats[k] : ints[k];
  }
  if (is_floating(dtype) && seed == 3 && !v.empty()) v[v.size() / 2] = NAN;  // NaN propagates
  return Tensor::from_vector(v, sizes).to(dtype);
}

std::vector<ReductionCase> every_reduction() {
  init();
  std::vector<ReductionCase> cases;
  const std::pair<const OpDef*, ReductionKind> ops_and_kinds[] = {
      {&ops::sum, ReductionKind::Sum}, {&ops::prod, ReductionKind::Prod},
      {&ops::amax, ReductionKind::Max}, {&ops::amin, ReductionKind::Min},
      {&ops::all, ReductionKind::All}, {&ops::any, ReductionKind::Any}};
  const std::vector<Shape> dim_sets = {{}, {0}, {2}, {0, 2}, {1, 2}, {-1}};
  for (auto [op, kind] : ops_and_kinds) {
    for (DType dtype : {kBool, kInt32, kInt64, kFloat32, kFloat64}) {
      for (int layout = 0; layout < 4; ++layout) {
        for (const Shape& dims : dim_sets) {
          Tensor input = sample(dtype, {4, 6, 7}, layout);
          if (layout == 1) input = sample(dtype, {7, 6, 4}, layout).transpose(0, 2);
          if (layout == 2) input = sample(dtype, {4, 6, 9}, layout).slice(2, 1, 8);
          ops::ReduceAttrs attrs;
          attrs.dims = dims;
          attrs.keepdim = layout == 2;
          Tensor expected;
          try {
            expected = dispatch(*op, std::vector<Tensor>{input}, attrs)[0];
          } catch (const Error&) {
            continue;  // a dtype this op does not take
          }
          ReductionCase c{op->name + "_" + std::to_string(cases.size()), kind, op, attrs, input,
                          expected, plan_reduction(input, reduction_mask(dims, 3, "test"))};
          cases.push_back(std::move(c));
        }
      }
    }
  }
  return cases;
}

std::string all_sources(const std::vector<ReductionCase>& cases) {
  std::string out;
  for (const ReductionCase& c : cases)
    out += reduction_kernel_source(c.kind, c.input.dtype(), c.expected.dtype(), c.plan, c.name);
  return out;
}

TEST(CudaReductionKernels, EveryReductionHasACudaKernelAndMakesOne) {
  const std::vector<ReductionCase> cases = every_reduction();
  EXPECT_GT(cases.size(), 400u);
  for (const OpDef* op : {&ops::sum, &ops::prod, &ops::amax, &ops::amin, &ops::all, &ops::any})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
}

TEST(CudaReductionKernels, NvrtcCompilesTheKernelsAndPtxasAssemblesThem) {
  // Every op and dtype with each plan pattern once (kept and reduced ranks): the host test
  // below runs every case.
  std::vector<ReductionCase> cases;
  std::set<std::string> seen;
  for (ReductionCase& c : every_reduction())
    if (seen.insert(reduction_kernel_key(c.kind, c.input.dtype(), c.expected.dtype(), c.plan)).second)
      cases.push_back(std::move(c));
  std::vector<std::string> names;
  for (const ReductionCase& c : cases) names.push_back(c.name);
  const std::string skipped = expect_gpu_toolchain_accepts(all_sources(cases), names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

TEST(CudaReductionKernels, EveryKernelComputesWhatTheCpuKernelDoes) {
  if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<ReductionCase> cases = every_reduction();
  const std::filesystem::path dir = scratch_dir("cuda_reductions");
  std::shared_ptr<void> library = build_on_host(all_sources(cases), dir);
  ASSERT_TRUE(library);
  using Kernel = void (*)(const void*, void*, long long, long long, ReduceKernelDims);
  for (const ReductionCase& c : cases) {
    auto kernel = reinterpret_cast<Kernel>(dlsym(library.get(), c.name.c_str()));
    ASSERT_NE(kernel, nullptr) << c.name;
    Tensor got = Tensor::empty(c.expected.sizes(), c.expected.dtype());
    kernel(c.input.raw_data(), got.raw_data(), c.plan.outputs, c.plan.reduced,
           reduce_kernel_dims(c.plan));
    // The same sums in another order: float32 products and sums differ in their last bits.
    const double rtol = c.expected.dtype() == kFloat32 ? 1e-5 : c.expected.dtype() == kFloat64 ? 1e-12 : 0;
    count_mismatches(got.to_vector<double>(), c.expected.to_vector<double>(), rtol, rtol,
                     c.name + " " + c.op->name + c.attrs.str() + " of " + c.input.type_str());
  }
  std::filesystem::remove_all(dir);
}

// ---- max_dim and min_dim ----

TEST(CudaArgReductionKernels, ValuesAndFirstIndicesAreTheCpuKernels) {
  init();
  struct Case {
    std::string name;
    bool max;
    int64_t dim;
    Tensor input;
    ReductionPlan plan;
  };
  std::vector<Case> cases;
  for (bool max : {true, false})
    for (DType dtype : {kBool, kInt32, kInt64, kFloat32, kFloat64})
      for (int layout = 0; layout < 4; ++layout)  // seed 3 puts a NaN in float inputs
        for (int64_t dim : {0, 1, 2, -1}) {
          Tensor x = layout == 1 ? sample(dtype, {7, 6, 4}, layout).transpose(0, 2)
                                 : sample(dtype, {4, 6, 7}, layout);
          const int64_t wrapped = dim < 0 ? dim + 3 : dim;
          cases.push_back({std::string(max ? "max_dim_" : "min_dim_") + std::to_string(cases.size()),
                           max, dim, x, plan_reduction(x, uint64_t{1} << wrapped)});
        }
  // The host runs every case; NVRTC and ptxas each distinct kernel (op, dtype, plan ranks).
  std::string source, distinct;
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const Case& c : cases) {
    const std::string kernel = arg_reduction_kernel_source(c.max, c.input.dtype(), c.plan, c.name);
    source += kernel;
    const std::string key = std::to_string(c.max) + std::string(dtype_name(c.input.dtype())) +
                            std::to_string(c.plan.kept_rank) + std::to_string(c.plan.reduced_rank);
    if (!seen.insert(key).second) continue;
    distinct += kernel;
    names.push_back(c.name);
  }
  const std::string no_toolchain = expect_gpu_toolchain_accepts(distinct, names);
  if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::filesystem::path dir = scratch_dir("cuda_arg_reductions");
  std::shared_ptr<void> library = build_on_host(source, dir);
  ASSERT_TRUE(library);
  using Kernel = void (*)(const void*, void*, void*, long long, long long, ReduceKernelDims);
  for (const Case& c : cases) {
    auto kernel = reinterpret_cast<Kernel>(dlsym(library.get(), c.name.c_str()));
    ASSERT_NE(kernel, nullptr) << c.name;
    ops::DimReduceAttrs attrs;
    attrs.dim = c.dim;
    const Tensors want = dispatch(c.max ? ops::max_dim : ops::min_dim, std::vector<Tensor>{c.input}, attrs);
    Tensor values = Tensor::empty(want[0].sizes(), want[0].dtype());
    Tensor indices = Tensor::empty(want[1].sizes(), kInt64);
    kernel(c.input.raw_data(), values.raw_data(), indices.raw_data(), c.plan.outputs, c.plan.reduced,
           reduce_kernel_dims(c.plan));
    const std::string what = c.name + " over dim " + std::to_string(c.dim) + " of " + c.input.type_str();
    count_mismatches(values.to_vector<double>(), want[0].to_vector<double>(), 0, 0, what + " values");
    count_mismatches(indices.to_vector<double>(), want[1].to_vector<double>(), 0, 0, what + " indices");
  }
  std::filesystem::remove_all(dir);
  if (!no_toolchain.empty()) GTEST_SKIP() << no_toolchain << " (the host run passed)";
}

// ---- var and norm ----

TEST(CudaStatisticKernels, VarAndEveryPNormAreTheCpuKernels) {
  init();
  struct Case {
    std::string name;
    std::string source;
    const OpDef* op;
    std::unique_ptr<Attrs> attrs;
    Tensor input;
    ReductionPlan plan;
    double correction = 0;  // var only
    bool to_toolchain = false;
  };
  std::vector<Case> cases;
  const std::vector<Shape> dim_sets = {{}, {0}, {2}, {0, 2}, {-1}};
  for (DType dtype : {kFloat32, kFloat64})
    for (int layout = 0; layout < 4; ++layout)  // seed 3 puts a NaN in the input
      for (const Shape& dims : dim_sets) {
        const Tensor x = layout == 1 ? sample(dtype, {7, 6, 4}, layout).transpose(0, 2)
                                     : sample(dtype, {4, 6, 7}, layout);
        const ReductionPlan plan = plan_reduction(x, reduction_mask(dims, 3, "test"));
        for (double correction : {0.0, 1.0, 30.0}) {
          auto attrs = std::make_unique<ops::VarAttrs>();
          attrs->dims = dims;
          attrs->correction = correction;
          const std::string name = "var_" + std::to_string(cases.size());
          cases.push_back({name, var_kernel_source(dtype, plan, name), &ops::var, std::move(attrs), x,
                           plan, correction, layout == 0 && dtype == kFloat64});
        }
        for (double p : {0.0, 1.0, 2.0, 3.0, 0.5, double(INFINITY), -double(INFINITY)}) {
          auto attrs = std::make_unique<ops::NormAttrs>();
          attrs->dims = dims;
          attrs->p = p;
          const std::string name = "norm_" + std::to_string(cases.size());
          cases.push_back({name, norm_kernel_source(p, dtype, plan, name), &ops::norm, std::move(attrs), x,
                           plan, 0, layout == 0 && dtype == kFloat64});
        }
      }
  // NVRTC and ptxas see the float64 kernels of one layout (every dim set and p); the host runs
  // them all.
  std::string source, distinct;
  std::vector<std::string> names;
  for (const Case& c : cases) {
    source += c.source;
    if (!c.to_toolchain) continue;
    distinct += c.source;
    names.push_back(c.name);
  }
  const std::string no_toolchain = expect_gpu_toolchain_accepts(distinct, names);
  if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::filesystem::path dir = scratch_dir("cuda_statistics");
  std::shared_ptr<void> library = build_on_host(source, dir);
  ASSERT_TRUE(library);
  for (const Case& c : cases) {
    void* entry = dlsym(library.get(), c.name.c_str());
    ASSERT_NE(entry, nullptr) << c.name;
    const Tensor want = dispatch(*c.op, std::vector<Tensor>{c.input}, *c.attrs)[0];
    Tensor got = Tensor::empty(want.sizes(), want.dtype());
    if (c.op == &ops::var)
      reinterpret_cast<void (*)(const void*, void*, long long, long long, ReduceKernelDims, double)>(entry)(
          c.input.raw_data(), got.raw_data(), c.plan.outputs, c.plan.reduced,
          reduce_kernel_dims(c.plan), c.correction);
    else
      reinterpret_cast<void (*)(const void*, void*, long long, long long, ReduceKernelDims)>(entry)(
          c.input.raw_data(), got.raw_data(), c.plan.outputs, c.plan.reduced,
          reduce_kernel_dims(c.plan));
    // var: float64 on both sides (two passes here, Welford there); norms: sums in the input's
    // dtype in another order.
    const double rtol = c.input.dtype() == kFloat32 ? 2e-6 : 1e-12;
    count_mismatches(got.to_vector<double>(), want.to_vector<double>(), rtol, rtol,
                     c.name + " " + c.op->name + c.attrs->str() + " of " + c.input.type_str());
  }
  std::filesystem::remove_all(dir);
  if (!no_toolchain.empty()) GTEST_SKIP() << no_toolchain << " (the host run passed)";
}

// ---- softmax and log_softmax ----

struct SoftmaxCase {
  std::string name;
  bool log;
  int64_t dim;
  Tensor input, expected;
  ReductionPlan plan;
};

std::vector<SoftmaxCase> every_softmax() {
  init();
  std::vector<SoftmaxCase> cases;
  for (bool log : {false, true}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (int64_t dim : {0, 1, 2, -1}) {
        // Rows of ordinary values, one with a NaN, one of large values (the maximum is
        // subtracted first), one of -inf and finite values.
        Tensor x = sample(dtype, {4, 6, 7}, 1) * 3;
        x.select(0, 1).fill_(60);
        x.select(0, 1).select(0, 2).fill_(90);
        x.select(0, 2).select(1, 3).fill_(-INFINITY);
        if (dim != 0) x.select(0, 3).select(1, 4).fill_(NAN);
        x = x.to(dtype);
        ops::SoftmaxAttrs attrs;
        attrs.dim = dim;
        const OpDef& op = log ? ops::log_softmax : ops::softmax;
        Tensor expected = dispatch(op, std::vector<Tensor>{x}, attrs)[0];
        const int64_t wrapped = dim < 0 ? dim + 3 : dim;
        cases.push_back({std::string(log ? "log_softmax_" : "softmax_") + std::to_string(cases.size()),
                         log, dim, x, expected, plan_reduction(x, uint64_t{1} << wrapped)});
      }
    }
  }
  return cases;
}

std::string all_softmax_sources(const std::vector<SoftmaxCase>& cases) {
  std::string out;
  for (const SoftmaxCase& c : cases) out += softmax_kernel_source(c.log, c.input.dtype(), c.plan, c.name);
  return out;
}

TEST(CudaSoftmaxKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  const std::vector<SoftmaxCase> cases = every_softmax();
  std::vector<std::string> names;
  for (const SoftmaxCase& c : cases) names.push_back(c.name);
  const std::string skipped = expect_gpu_toolchain_accepts(all_softmax_sources(cases), names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
  for (const OpDef* op : {&ops::softmax, &ops::log_softmax})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
}

TEST(CudaSoftmaxKernels, EveryKernelComputesWhatTheCpuKernelDoes) {
  if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<SoftmaxCase> cases = every_softmax();
  const std::filesystem::path dir = scratch_dir("cuda_softmax");
  std::shared_ptr<void> library = build_on_host(all_softmax_sources(cases), dir);
  ASSERT_TRUE(library);
  using Kernel = void (*)(const void*, void*, long long, long long, ReduceKernelDims);
  for (const SoftmaxCase& c : cases) {
    auto kernel = reinterpret_cast<Kernel>(dlsym(library.get(), c.name.c_str()));
    ASSERT_NE(kernel, nullptr) << c.name;
    Tensor got = Tensor::empty(c.input.sizes(), c.input.dtype());
    kernel(c.input.raw_data(), got.raw_data(), c.plan.outputs, c.plan.reduced,
           reduce_kernel_dims(c.plan));
    const double rtol = c.input.dtype() == kFloat32 ? 2e-6 : 1e-13;
    count_mismatches(got.to_vector<double>(), c.expected.to_vector<double>(), rtol, rtol,
                     c.name + " over dim " + std::to_string(c.dim) + " of " + c.input.type_str());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::cuda
