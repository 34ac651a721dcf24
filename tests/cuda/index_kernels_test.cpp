// The eager CUDA index and pad kernels, checked without a GPU as the other generated kernels
// are (cuda/generated_kernels.h): NVRTC and ptxas accept them, and on the host they give what
// the CPU kernels give for index_select, embedding and their gradients, gather, scatter_add,
// one_hot and every pad mode, on strided inputs, with duplicate indices; the index check
// finds the first index out of range.
#include "kiln/cuda/index_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/embedding.h"
#include "kiln/ops/layout.h"
#include "kiln/ops/one_hot.h"
#include "kiln/ops/pad.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

struct Made {
  IndexKernel kind;
  DType dtype;
  std::string name;
};

std::vector<Made> every_kernel() {
  std::vector<Made> out;
  auto add = [&](IndexKernel kind, const char* what, std::vector<DType> dtypes) {
    for (DType d : dtypes) out.push_back({kind, d, std::string(what) + "_" + std::string(dtype_name(d))});
  };
  const std::vector<DType> all = {kBool, kInt32, kInt64, kFloat32, kFloat64, kFloat16, kBFloat16};
  const std::vector<DType> summed = {kBool, kInt32, kInt64, kFloat32, kFloat64};
  add(IndexKernel::Check, "check", {kInt64});
  add(IndexKernel::Rows, "rows", all);
  add(IndexKernel::AddRows, "add_rows", summed);
  add(IndexKernel::Gather, "gather", all);
  add(IndexKernel::ScatterAdd, "scatter_add", summed);
  add(IndexKernel::OneHot, "one_hot", {kInt64});
  add(IndexKernel::Pad, "pad", all);
  add(IndexKernel::PadBackward, "pad_backward", {kFloat32, kFloat64});
  return out;
}

std::string sources() {
  std::string s;
  for (const Made& m : every_kernel()) s += index_kernel_source(m.kind, m.dtype, m.name);
  return s;
}

TEST(CudaIndexKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  init();
  for (const OpDef* op : {&ops::cat, &ops::slice_scatter, &ops::pad, &ops::pad_backward, &ops::index_select,
                          &ops::index_add, &ops::embedding, &ops::embedding_backward, &ops::gather,
                          &ops::scatter_add, &ops::one_hot})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  std::vector<std::string> names;
  for (const Made& m : every_kernel()) names.push_back(m.name);
  const std::string skipped = expect_gpu_toolchain_accepts(sources(), names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

TEST(CudaIndexKernels, ScattersRefuseHalfPrecision) {
  expect_error([] { index_kernel_source(IndexKernel::ScatterAdd, kFloat16, "s"); },
               {"[cuda] the scatter kernels", "got float16", "Fix: scatter in float32"});
}

class CudaIndexOnHost : public HostKernelSuite {
 protected:
  static void SetUpTestSuite() { build("cuda_index", sources()); }
  static void TearDownTestSuite() { release(); }
};

Tensor indices(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v); }

TEST_F(CudaIndexOnHost, TheCheckFindsTheFirstIndexOutOfRange) {
  using Check = void (*)(const void*, long long, long long, long long, int, long long*);
  const auto check = entry<Check>("check_int64");
  const Tensor index = indices({3, 0, 5, -1, 9, 4});
  long long bad = LLONG_MAX;
  check(index.raw_data(), 6, 10, 0, 0, &bad);
  EXPECT_EQ(bad, 3);  // -1
  bad = LLONG_MAX;
  check(index.raw_data(), 6, 5, 0, 0, &bad);
  EXPECT_EQ(bad, 2);  // 5 >= 5
  bad = LLONG_MAX;
  check(index.raw_data(), 6, 10, -1, 1, &bad);  // -1 allowed (an ignore_index)
  EXPECT_EQ(bad, LLONG_MAX);
}

TEST_F(CudaIndexOnHost, RowGathersAndScattersAreIndexSelectEmbeddingAndTheirGradients) {
  using Rows = void (*)(const void*, const void*, void*, long long, long long, long long, long long);
  using AddRows = void (*)(const void*, const void*, void*, long long, long long, long long, long long, long long);
  manual_seed(3);
  for (DType d : {kInt64, kFloat32, kFloat64, kBool}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const std::string suffix = "_" + std::string(dtype_name(d));
    const Tensor x = (randn({2, 5, 3}) * 4).to(d), index = indices({4, 0, 4, 2});
    ops::DimAttrs along;
    along.dim = 1;
    const Tensor want = dispatch(ops::index_select, std::vector<Tensor>{x, index}, along)[0];
    Tensor got = Tensor::empty(want.sizes(), d);
    entry<Rows>("rows" + suffix)(x.raw_data(), index.raw_data(), got.raw_data(), got.numel(), 4, 5, 3);
    EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());

    // index_add with a duplicate index: both rows add into slice 4.
    const Tensor src = (randn({2, 4, 3}) * 4).to(d);
    const Tensor want_sum = dispatch(ops::index_add, std::vector<Tensor>{x, index, src}, along)[0];
    Tensor sum = x.clone();
    entry<AddRows>("add_rows" + suffix)(src.raw_data(), index.raw_data(), sum.raw_data(), src.numel(), 4, 5, 3,
                                        LLONG_MIN);
    count_mismatches(sum.to_vector<double>(), want_sum.to_vector<double>(), 1e-6, 0, "index_add");
  }
  // embedding's gradient skips the padding row.
  const Tensor grad = randn({6, 4}), rows = indices({1, 3, 1, 0, 3, 3});
  ops::EmbeddingBackwardAttrs a;
  a.num_weights = 5;
  a.padding_idx = 3;
  const Tensor want = dispatch(ops::embedding_backward, std::vector<Tensor>{grad, rows}, a)[0];
  Tensor got = zeros({5, 4});
  entry<AddRows>("add_rows_float32")(grad.raw_data(), rows.raw_data(), got.raw_data(), 24, 6, 5, 4, 3);
  count_mismatches(got.to_vector<double>(), want.to_vector<double>(), 1e-6, 0, "embedding_backward");
}

TEST_F(CudaIndexOnHost, GatherAndScatterAddFollowStridesAndAccumulateDuplicates) {
  using Kernel = void (*)(const void*, const void*, void*, long long, IndexDims);
  manual_seed(4);
  for (DType d : {kInt32, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const std::string suffix = "_" + std::string(dtype_name(d));
    for (int64_t dim : {0, 1}) {
      const Tensor x = (randn({5, 4}) * 4).to(d).t();  // [4, 5], strided
      const Tensor index = Tensor::from_vector<int64_t>({0, 2, 2, 1, 3, 0, 1, 1, 2}, {3, 3});
      ops::DimAttrs along;
      along.dim = dim;
      const Tensor want = dispatch(ops::gather, std::vector<Tensor>{x, index}, along)[0];
      Tensor got = Tensor::empty({3, 3}, d);
      entry<Kernel>("gather" + suffix)(x.raw_data(), index.raw_data(), got.raw_data(), 9,
                                       index_dims(index, x, got, dim));
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << "gather along " << dim;

      const Tensor src = (randn({4, 3}) * 4).to(d).t();  // [3, 4], strided
      const Tensor want_sum = dispatch(ops::scatter_add, std::vector<Tensor>{x, index, src}, along)[0];
      Tensor sum = x.contiguous();
      entry<Kernel>("scatter_add" + suffix)(src.raw_data(), index.raw_data(), sum.raw_data(), 9,
                                            index_dims(index, sum, src, dim));
      count_mismatches(sum.to_vector<double>(), want_sum.to_vector<double>(), 1e-6, 0,
                       "scatter_add along " + std::to_string(dim));
    }
  }
  using OneHot = void (*)(const void*, void*, long long, long long);
  const Tensor classes = indices({2, 0, 3, 3});
  ops::OneHotAttrs a;
  a.num_classes = 5;
  const Tensor want = dispatch(ops::one_hot, std::vector<Tensor>{classes}, a)[0];
  Tensor got = Tensor::empty({4, 5}, kInt64);
  entry<OneHot>("one_hot_int64")(classes.raw_data(), got.raw_data(), 20, 5);
  EXPECT_EQ(got.to_vector<int64_t>(), want.to_vector<int64_t>());
}

TEST_F(CudaIndexOnHost, EveryPadModeAndItsGradientAreTheCpuKernels) {
  // The fill is a parameter of the element's type (by value: float and double travel in
  // other registers than integers on the host).
  auto pad = [](DType d, const Tensor& x, Tensor& out, PadDims p, double fill) {
    const std::string name = "pad_" + std::string(dtype_name(d));
    if (d == kFloat32)
      entry<void (*)(const void*, void*, long long, PadDims, float)>(name)(x.raw_data(), out.raw_data(),
                                                                         out.numel(), p, static_cast<float>(fill));
    else if (d == kFloat64)
      entry<void (*)(const void*, void*, long long, PadDims, double)>(name)(x.raw_data(), out.raw_data(),
                                                                          out.numel(), p, fill);
    else
      entry<void (*)(const void*, void*, long long, PadDims, long long)>(name)(
          x.raw_data(), out.raw_data(), out.numel(), p, static_cast<long long>(fill));
  };
  using PadBackward = void (*)(const void*, void*, long long, PadDims);
  manual_seed(5);
  for (const char* mode : {"constant", "reflect", "replicate", "circular"}) {
    for (DType d : {kFloat32, kInt64, kFloat64}) {
      SCOPED_TRACE(std::string(mode) + " " + std::string(dtype_name(d)));
      const Tensor x = (randn({3, 4, 2}) * 5).to(d).permute({0, 2, 1});  // [3, 2, 4], strided
      ops::PadAttrs a;
      a.mode = mode;
      a.pad = std::string(mode) == "constant" ? Shape{2, -1, 1, 3} : Shape{3, 2, 1, 1};
      a.value = 2.5;
      const Tensor want = dispatch(ops::pad, std::vector<Tensor>{x}, a)[0];
      Tensor got = Tensor::empty(want.sizes(), d);
      pad(d, x, got, pad_dims(x.sizes(), got.sizes(), x.strides(), a), a.value);
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
      if (std::string(mode) == "constant" || d == kInt64) continue;
      const Tensor grad = randn(want.sizes()).to(d);
      const Tensor want_grad = dispatch(ops::pad_backward, std::vector<Tensor>{grad}, a)[0];
      Tensor grad_x = zeros(x.sizes(), d);
      entry<PadBackward>("pad_backward_" + std::string(dtype_name(d)))(
          grad.raw_data(), grad_x.raw_data(), grad.numel(),
          pad_dims(grad_x.sizes(), grad.sizes(), grad_x.strides(), a));
      count_mismatches(grad_x.to_vector<double>(), want_grad.to_vector<double>(), 1e-6, 1e-7, "pad_backward");
    }
  }
}

}  // namespace
}  // namespace kiln::cuda
