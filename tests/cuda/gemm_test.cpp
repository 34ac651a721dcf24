// GEMM through cuBLASLt without a GPU: the loader finds the toolkit's cuBLASLt (or says why
// not), and every plan — transposed and sliced views, broadcast and merged batch dims, batch
// dims that stay apart, degenerate sizes — run through a column-major reference GEMM (what
// cuBLASLt computes from the plan's numbers) gives the CPU's matmul. tests/cuda/tensor_test.cpp
// runs matmul on a GPU.
#include "kiln/cuda/gemm.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "cuda/requirements.h"
#include "kiln/cuda/cublaslt.h"
#include "kiln/cuda/integer_gemm.h"
#include "kiln/kiln.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

// What cuBLASLt computes for `plan`: for each call and each matrix of its batch,
// D = op(X) · op(Y), column-major, float64 here.
void reference_gemm(const GemmPlan& plan, const double* x, const double* y, double* d) {
  auto at = [](const GemmMatrix& m, const double* base, int64_t i, int64_t j) {
    // Element (i, j) of op(m): of the stored matrix, (i, j) or (j, i).
    return m.transposed ? base[j + i * m.ld] : base[i + j * m.ld];
  };
  for (const auto& call : plan.calls) {
    for (int64_t batch = 0; batch < plan.batch; ++batch) {
      const double* xb = x + call[0] + batch * plan.x.batch_stride;
      const double* yb = y + call[1] + batch * plan.y.batch_stride;
      double* db = d + call[2] + batch * plan.d.batch_stride;
      for (int64_t i = 0; i < plan.m; ++i)
        for (int64_t j = 0; j < plan.n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < plan.k; ++p) sum += at(plan.x, xb, i, p) * at(plan.y, yb, p, j);
          db[i + j * plan.d.ld] = sum;
        }
    }
  }
}

// matmul(a, b) through the plan and the reference GEMM, against the CPU's matmul. `a` and `b`
// are views into float64 tensors (their storage is what cuBLASLt would read).
void expect_plan_computes_matmul(const Tensor& a, const Tensor& b, const std::string& what) {
  SCOPED_TRACE(what + ": " + a.type_str() + " strides " + shape_str(a.strides()) + " x " +
               b.type_str() + " strides " + shape_str(b.strides()));
  const Tensor want = matmul(a, b);
  GemmPlan plan = plan_gemm(a.sizes(), a.strides(), b.sizes(), b.strides(), want.sizes());
  Tensor ad = a, bd = b;
  if (plan.a_needs_copy || plan.b_needs_copy) {
    if (plan.a_needs_copy) ad = a.contiguous();
    if (plan.b_needs_copy) bd = b.contiguous();
    plan = plan_gemm(ad.sizes(), ad.strides(), bd.sizes(), bd.strides(), want.sizes());
    ASSERT_FALSE(plan.a_needs_copy || plan.b_needs_copy);
  }
  // Every matrix a call writes lies inside the output; nothing is written twice.
  EXPECT_EQ(static_cast<int64_t>(plan.calls.size()) * plan.batch * plan.m * plan.n, want.numel());
  Tensor got = zeros(want.sizes(), kFloat64);
  reference_gemm(plan, bd.data_ptr<double>(), ad.data_ptr<double>(), got.data_ptr<double>());
  count_mismatches(got.to_vector<double>(), want.to_vector<double>(), 1e-12, 1e-12, what);
}

Tensor values(IntList sizes) {
  return kiln::sin(arange(numel(sizes)).to(kFloat64).reshape(sizes) * 0.37);
}

TEST(CudaGemmPlan, TwoDimensionalViewsGoAsTheyAreWithTransposeFlags) {
  const Tensor a = values({5, 7}), b = values({7, 3});
  expect_plan_computes_matmul(a, b, "contiguous");
  expect_plan_computes_matmul(values({7, 5}).t(), b, "a transposed");
  expect_plan_computes_matmul(a, values({3, 7}).t(), "b transposed");
  expect_plan_computes_matmul(values({7, 5}).t(), values({3, 7}).t(), "both transposed");
  expect_plan_computes_matmul(values({5, 11}).slice(1, 2, 9), values({9, 3}).slice(0, 1, 8),
                              "sliced: leading dims larger than the rows");
  const GemmPlan plan = plan_gemm(Shape{5, 7}, Shape{1, 5}, Shape{7, 3}, Shape{3, 1}, Shape{5, 3});
  EXPECT_TRUE(plan.y.transposed);
  EXPECT_FALSE(plan.x.transposed);
  EXPECT_EQ(plan.m, 3);
  EXPECT_EQ(plan.n, 5);
  EXPECT_EQ(plan.k, 7);
}

TEST(CudaGemmPlan, DegenerateSizesKeepValidLeadingDims) {
  expect_plan_computes_matmul(values({1, 7}), values({7, 3}), "one row");
  expect_plan_computes_matmul(values({5, 7}), values({7, 1}), "one column");
  expect_plan_computes_matmul(values({5, 1}), values({1, 3}), "an outer product");
  expect_plan_computes_matmul(values({7, 1}).t(), values({7, 1}), "a dot product of views");
  expect_plan_computes_matmul(values({1, 9}).slice(1, 0, 9, 2), values({5, 4}), "a strided row");
}

TEST(CudaGemmPlan, BatchDimsMergeBroadcastAndLoop) {
  expect_plan_computes_matmul(values({4, 5, 7}), values({4, 7, 3}), "batched");
  const GemmPlan merged = plan_gemm(Shape{2, 3, 5, 7}, Shape{105, 35, 7, 1}, Shape{2, 3, 7, 4},
                                    Shape{84, 28, 4, 1}, Shape{2, 3, 5, 4});
  EXPECT_EQ(merged.batch, 6) << "contiguous batch dims merge into one batched call";
  EXPECT_EQ(merged.calls.size(), 1u);
  expect_plan_computes_matmul(values({2, 3, 5, 7}), values({2, 3, 7, 4}), "two batch dims");
  expect_plan_computes_matmul(values({4, 5, 7}), values({7, 3}), "b broadcast over the batch");
  expect_plan_computes_matmul(values({5, 7}), values({4, 7, 3}), "a broadcast over the batch");
  expect_plan_computes_matmul(values({2, 1, 5, 7}), values({1, 3, 7, 4}), "both broadcast");
  // Batch dims permuted: they cannot merge, so the outer one becomes a loop of calls.
  const Tensor permuted = values({3, 2, 5, 7}).transpose(0, 1);
  const GemmPlan looped = plan_gemm(permuted.sizes(), permuted.strides(), Shape{2, 3, 7, 4},
                                    Shape{84, 28, 4, 1}, Shape{2, 3, 5, 4});
  EXPECT_EQ(looped.calls.size() * static_cast<size_t>(looped.batch), 6u);
  EXPECT_GT(looped.calls.size(), 1u);
  expect_plan_computes_matmul(permuted, values({2, 3, 7, 4}), "permuted batch dims");
  expect_plan_computes_matmul(values({4, 7, 5}).transpose(1, 2), values({4, 3, 7}).transpose(1, 2),
                              "batched transposes");
}

TEST(CudaGemmPlan, ViewsWithNeitherRowsNorColumnsContiguousAreCopiedFirst) {
  const Tensor a = values({10, 14}).slice(0, 0, 10, 2).slice(1, 0, 14, 2);  // [5, 7], strides [28, 2]
  const GemmPlan plan = plan_gemm(a.sizes(), a.strides(), Shape{7, 3}, Shape{3, 1}, Shape{5, 3});
  EXPECT_TRUE(plan.a_needs_copy);
  EXPECT_FALSE(plan.b_needs_copy);
  expect_plan_computes_matmul(a, values({7, 3}), "every other row and column");
}

TEST(CudaGemm, TheIntegerKernelCompilesForTheGpu) {
  const std::string source = integer_gemm_source(kInt32, "gemm_i32") + integer_gemm_source(kInt64, "gemm_i64");
  const std::string skipped = expect_gpu_toolchain_accepts(source, {"gemm_i32", "gemm_i64"});
  if (!skipped.empty()) GTEST_SKIP() << skipped;
  expect_error([] { integer_gemm_source(kBool, "b"); }, {"the integer matmul kernel takes int32 or int64, got bool"});
}

TEST(CudaGemm, Tf32IsOffUntilAskedFor) {
  EXPECT_FALSE(allow_tf32());
  set_allow_tf32(true);
  EXPECT_TRUE(allow_tf32());
  set_allow_tf32(false);
  EXPECT_FALSE(allow_tf32());
}

TEST(CudaCublasLt, TheToolkitsLibraryIsFoundOrTheReasonSaysWhatWasTried) {
  const cublaslt::Loaded& lt = cublaslt::loaded();
  EXPECT_EQ(cublaslt::available(), lt.api != nullptr);
  EXPECT_EQ(cublaslt::available(), cublaslt::unavailable_reason().empty());
  if (!cublaslt::available()) {
    EXPECT_NE(lt.unavailable_reason.find("libcublasLt.so.13"), std::string::npos)
        << lt.unavailable_reason;
    GTEST_SKIP() << "no cuBLASLt: " << lt.unavailable_reason;
  }
  EXPECT_GE(lt.version, 120000u) << lt.library;
  EXPECT_EQ(cublaslt::status_name(cublaslt::kSuccess), "CUBLAS_STATUS_SUCCESS");
}

TEST(CudaCublasLt, AMissingPathOrALibraryThatIsNotCublasLtIsNamed) {
  cublaslt::Loaded missing = cublaslt::load("/nonexistent/libcublasLt.so.13");
  EXPECT_EQ(missing.api, nullptr);
  EXPECT_NE(missing.unavailable_reason.find("/nonexistent/libcublasLt.so.13 (set by KILN_CUBLASLT)"),
            std::string::npos)
      << missing.unavailable_reason;
  EXPECT_NE(missing.unavailable_reason.find("Fix:"), std::string::npos);
  cublaslt::Loaded wrong = cublaslt::load("libm.so.6");
  EXPECT_EQ(wrong.api, nullptr);
  EXPECT_NE(wrong.unavailable_reason.find("libm.so.6 has no cublasLtCreate"), std::string::npos)
      << wrong.unavailable_reason;
}

// matmul_with_epilogue against the CPU's act(a · b + bias), for each epilogue cuBLASLt has,
// with the weight read transposed as a Linear layer's is.
TEST(CudaGemmEpilogue, AddsTheBiasAndAppliesTheActivationAsTheProductIsStored) {
  REQUIRE_GPU();
  manual_seed(11);
  Tensor a = randn({5, 7}), w = randn({3, 7}), bias = randn({3});
  Tensor ag = a.to(kCUDA), wt = w.to(kCUDA).transpose(0, 1), bg = bias.to(kCUDA);
  const Tensor product = matmul(a, w.transpose(0, 1));
  struct Case {
    const char* name;
    bool bias;
    GemmActivation activation;
    Tensor want;
  } cases[] = {
      {"bias", true, GemmActivation::None, product + bias},
      {"relu(bias)", true, GemmActivation::Relu, relu(product + bias)},
      {"gelu_tanh(bias)", true, GemmActivation::GeluTanh,
       gelu(product + bias, GeluApproximation::Tanh)},
      {"relu", false, GemmActivation::Relu, relu(product)},
      {"gelu_tanh", false, GemmActivation::GeluTanh, gelu(product, GeluApproximation::Tanh)},
  };
  for (const Case& c : cases) {
    Tensor out = Tensor::empty({5, 3}, kFloat32, kCUDA);
    GemmEpilogue epilogue;
    if (c.bias) epilogue.bias = bg;
    epilogue.activation = c.activation;
    matmul_with_epilogue(ag, wt, epilogue, out);
    EXPECT_EQ(count_mismatches(out.to(kCPU).to_vector<double>(), c.want.to_vector<double>(), 1e-4,
                               1e-5, c.name),
              0);
  }
}

TEST(CudaGemmEpilogue, OneOfTheWrongShapeOrDtypeIsRefused) {
  REQUIRE_GPU();
  Tensor a = ones({4, 2}).to(kCUDA), b = ones({2, 3}).to(kCUDA);
  Tensor out = Tensor::empty({4, 3}, kFloat32, kCUDA);
  GemmEpilogue wrong;
  wrong.bias = ones({4}).to(kCUDA);  // one per row, not per column
  expect_error([&] { matmul_with_epilogue(a, b, wrong, out); },
               {"[matmul_with_epilogue] expected a contiguous float32[3] bias on cuda:0",
                "got float32[4]."});
  expect_error([&] { matmul_with_epilogue(a, ones({3, 3}).to(kCUDA), {}, out); },
               {"expected a [M, K] · b [K, N] into a contiguous [M, N], got [4, 2] · [3, 3]"});
}

}  // namespace
}  // namespace kiln::cuda
