// Tensor metadata, views, element access, printing, dtypes and type promotion.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(Tensor, SizeArithmeticNeverWraps) {
  // Shapes from configs, files and the C API: an element count, a stride or a byte count
  // that leaves int64 is an error naming the shape, not a small wrapped allocation.
  constexpr int64_t k2to40 = int64_t{1} << 40, kMax = 9223372036854775807;
  expect_error(
      [] {
        numel({k2to40, k2to40});
      },
      {"the shape [1099511627776, 1099511627776] has more elements than a 64-bit size"});
  expect_error([] { contiguous_strides({0, k2to40, k2to40}); }, {"elements per stride"});
  expect_error([&] { Tensor::empty({kMax}, kFloat32); },
               {"Tensor::empty: the byte count", "9223372036854775807 * 4", "does not fit"});
  expect_error([&] { Tensor::empty({k2to40, k2to40}, kFloat32); }, {"more elements"});
  float x = 0;
  expect_error(
      [&] {
        Tensor::from_blob(&x, {2, 2}, kFloat32, {kMax, 1});
      },
      {"Tensor::from_blob: the span"});
  EXPECT_EQ(size_mul(3, 4, "x"), 12);
  EXPECT_EQ(size_add(kMax - 1, 1, "x"), kMax);
  expect_error([] { size_add(kMax, 1, "the padded width"); },
               {"the padded width: 9223372036854775807 + 1 does not fit a 64-bit size"});
  // A size that fits but cannot be allocated is an out-of-memory error.
  expect_error([] { Tensor::empty({int64_t{1} << 60}, kFloat32); }, {"out of memory"});
}

TEST(Tensor, ShapeOpsCheckTheirSizeArithmetic) {
  // The infers of reshape, view, expand and cat compute sizes from attributes that may come
  // from IR text or a user's arithmetic: none of them wraps.
  constexpr int64_t k2to40 = int64_t{1} << 40, k2to62 = int64_t{1} << 62;
  Tensor x = kiln::zeros({2, 4});
  expect_error([&] { x.reshape({k2to40, k2to40, -1}); },
               {"[reshape] the shape [1099511627776, 1099511627776, -1] has more elements"});
  expect_error([&] { x.reshape({2, -5, 4}); }, {"[reshape] invalid size -5"});
  Tensor one = kiln::zeros({1, 1});
  expect_error([&] { one.expand({k2to40, k2to40}); }, {"more elements than a 64-bit size"});
  expect_error([&] { one.expand({3, -5}); }, {"[expand] expected sizes >= 0"});
  Tensor wide = kiln::zeros({1, 0}).expand({k2to62, 0});  // a view: nothing allocated
  expect_error([&] { kiln::cat({wide, wide}, 0); },
               {"[cat] the concatenated dim: 4611686018427387904 + 4611686018427387904 does not "
                "fit a 64-bit size"});
  EXPECT_EQ(kiln::cat({x, x}, 0).size(0), 4);
}

TEST(Tensor, AnUndefinedTensorRefusesReadsInsteadOfCrashing) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  for (auto read : std::vector<std::function<void()>>{
           [&] { (void)t.sizes(); }, [&] { (void)t.dim(); }, [&] { (void)t.numel(); },
           [&] { (void)t.size(0); }, [&] { (void)t.dtype(); }, [&] { (void)t.device(); }})
    expect_error(read, {"of an undefined tensor", "default-constructed kiln::Tensor()",
                        "Fix:", "t.defined()"});
  nn::Linear linear(3, 4);
  expect_error([&] { linear(Tensor()); }, {"undefined"});
}

TEST(Tensor, FromVectorAndAccess) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.stride(0), 3);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t[1][2].item<float>(), 6.0f);
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
}

// Found by fuzzing the safetensors reader: a loaded [3, 0] tensor (strides [1, 1]) read as
// non-contiguous, so writing it back needed a clone kernel.
TEST(Tensor, AnEmptyTensorIsContiguous) {
  EXPECT_TRUE(Tensor::empty({3, 0}, kFloat32).is_contiguous());
  EXPECT_TRUE(Tensor::empty({0, 2, 0}, kFloat32).is_contiguous());
  EXPECT_FALSE(Tensor::empty({2, 3}, kFloat32).alias({3, 2}, {1, 3}, 0).is_contiguous());
}

TEST(Tensor, FromVectorChecksCount) {
  EXPECT_NE(error_of([] { Tensor::from_vector<float>({1, 2, 3}, {2, 2}); }).find("expected 4 values"), std::string::npos);
}

TEST(Tensor, FromBlobSharesMemory) {
  std::vector<double> data = {1, 2, 3, 4};
  Tensor t = Tensor::from_blob(data.data(), {2, 2}, kFloat64);
  data[3] = 40;
  EXPECT_EQ(t[1][1].item<double>(), 40);
  bool deleted = false;
  {
    Tensor owned = Tensor::from_blob(data.data(), {4}, kFloat64, {}, [&](void*) { deleted = true; });
    Tensor view = owned.slice(0, 1, 3);
    owned = Tensor();
    EXPECT_FALSE(deleted);  // the view keeps the storage alive
  }
  EXPECT_TRUE(deleted);
}

TEST(Tensor, ViewsShareStorageWithoutCopy) {
  Tensor t = arange(24).reshape({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_TRUE(p.shares_storage(t));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(Shape(p.sizes()), (Shape{4, 2, 3}));
  EXPECT_EQ(p[3][1][2].item<int64_t>(), t[1][2][3].item<int64_t>());
  Tensor s = t.slice(2, 1, 4, 2);
  EXPECT_TRUE(s.shares_storage(t));
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  Tensor e = t[0][0].unsqueeze(0).expand({3, 4});
  EXPECT_EQ(e.stride(0), 0);
  EXPECT_EQ(e.to_vector<int64_t>()[8], 0);
  Tensor n = t.narrow(1, 1, 2).select(2, -1);
  EXPECT_EQ(n.to_vector<int64_t>(), (std::vector<int64_t>{7, 11, 19, 23}));
  EXPECT_EQ(Shape(t.flatten(1).sizes()), (Shape{2, 12}));
  EXPECT_EQ(Shape(t.unsqueeze(-1).squeeze().sizes()), (Shape{2, 3, 4}));
  Tensor a = t.as_strided({3, 2}, {4, 1}, 1);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 5, 6, 9, 10}));
}

TEST(Tensor, ReshapeCopiesOnlyWhenNeeded) {
  Tensor t = arange(12).reshape({3, 4});
  EXPECT_TRUE(t.reshape({4, 3}).shares_storage(t));
  Tensor tt = t.t();
  Tensor r = tt.reshape({12});  // transposed: not viewable, so a copy
  EXPECT_FALSE(r.shares_storage(t));
  EXPECT_EQ(r.to_vector<int64_t>()[1], 4);
  EXPECT_NE(error_of([&] { tt.view({12}); }).find("without copying"), std::string::npos);
  EXPECT_TRUE(tt.contiguous().is_contiguous());
  EXPECT_EQ(Shape(t.reshape({-1, 6}).sizes()), (Shape{2, 6}));
  EXPECT_NE(error_of([&] { t.reshape({5, -1}); }).find("cannot infer"), std::string::npos);
}

TEST(Tensor, ViewErrorsNameTheProblem) {
  Tensor t = zeros({2, 3});
  EXPECT_NE(error_of([&] { t.permute({0, 0}); }).find("repeats"), std::string::npos);
  EXPECT_NE(error_of([&] { t.select(1, 3); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { t.expand({4, 3}); }).find("only size-1 dims expand"), std::string::npos);
  EXPECT_NE(error_of([&] { t.transpose(0, 2); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { t.as_strided({3, 3}, {3, 1}, 0); }).find("storage holds 6"), std::string::npos);
  EXPECT_NE(error_of([&] { t.item<float>(); }).find("one element"), std::string::npos);
  EXPECT_NE(error_of([&] { t.data_ptr<double>(); }).find("float32"), std::string::npos);
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(arange(6).reshape({2, 3}).str(), "tensor([[0, 1, 2],\n        [3, 4, 5]])");
  EXPECT_EQ(tensor({1.5, -2.25}).str(), "tensor([ 1.5000, -2.2500])");
  EXPECT_EQ(tensor({1.0, 2.0}).str(), "tensor([1., 2.])");
  EXPECT_EQ(Tensor::scalar(true).str(), "tensor(True)");
  EXPECT_EQ(arange(3).to(kInt32).str(), "tensor([0, 1, 2], dtype=int32)");
  EXPECT_EQ(zeros({0, 2}).str(), "tensor([], size=[0, 2])");
  EXPECT_NE(arange(5000).str().find("..."), std::string::npos);
  EXPECT_EQ(ones({2}).requires_grad_().str(), "tensor([1., 1.], requires_grad=True)");
}

TEST(DType, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(kInt32, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kBool, kInt32), kInt32);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  Tensor i32 = arange(3).to(kInt32), f64 = ones({3}, kFloat64), b = ones({3}, kBool);
  EXPECT_EQ((i32 + 2).dtype(), kInt32);              // integer scalar keeps the tensor type
  EXPECT_EQ((i32 + 2.5).dtype(), kFloat32);          // float scalar: default float
  EXPECT_EQ((f64 + 2.5).dtype(), kFloat64);
  EXPECT_EQ((i32 + f64).dtype(), kFloat64);
  EXPECT_EQ((b + 1).dtype(), kInt64);
  EXPECT_EQ((i32 + Tensor::scalar(int64_t{5})).dtype(), kInt32);  // 0-d does not widen within a category
  EXPECT_EQ((i32 + Tensor::scalar(1.5)).dtype(), kFloat32);        // ... but lifts the category
  EXPECT_EQ((i32 / 2).dtype(), kFloat32);                          // true division
  EXPECT_EQ(exp(i32).dtype(), kFloat32);
  EXPECT_EQ((i32 > 1).dtype(), kBool);
}

TEST(DType, HalfAndBFloat16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f, 3.14159f}) {
    EXPECT_EQ(static_cast<float>(Half(f)), static_cast<float>(Half(static_cast<float>(Half(f)))));
  }
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(1e6f).bits, 0x7c00);                 // overflow to inf
  EXPECT_EQ(Half(5.9604645e-08f).bits, 0x0001);       // smallest subnormal
  EXPECT_EQ(Half(0.1f).bits, 0x2e66);
  EXPECT_EQ(Half::to_float(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(NAN))));
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(3.14159f).bits, 0x4049);
  Tensor h = tensor({1.0, 0.1, -3.0}).to(kFloat16);
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_EQ(h.element_size(), 2u);
  EXPECT_NEAR(h.to(kFloat32).to_vector<float>()[1], 0.1f, 1e-4);
  EXPECT_NE(error_of([&] { exp(h.to(kFloat16)) ; }).find("storage-only"), std::string::npos);
}

TEST(Device, ParsesAndRejects) {
  EXPECT_EQ(Device("cuda:1"), Device(DeviceType::CUDA, 1));
  EXPECT_EQ(Device("cpu"), kCPU);
  EXPECT_NE(error_of([] { Device("tpu"); }).find("expected \"cpu\""), std::string::npos);
}

TEST(InPlace, BumpsVersionAndWritesThrough) {
  Tensor t = zeros({2, 3});
  uint64_t v0 = t.version();
  Tensor row = t[1];
  row.add_(ones({3}));
  EXPECT_GT(t.version(), v0);  // views share the counter
  EXPECT_EQ(t.sum().item<float>(), 3.0f);
  t.mul_(2).sub_(ones({2, 3})).div_(2.0);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{-0.5f, -0.5f, -0.5f, 0.5f, 0.5f, 0.5f}));
  t.t().copy_(arange(6).reshape({3, 2}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 2, 4, 1, 3, 5}));
  t.fill_(7).clamp_(std::nullopt, 5);
  EXPECT_EQ(t.to_vector<float>()[0], 5.0f);
  t.zero_();
  EXPECT_EQ(t.sum().item<float>(), 0.0f);
  Tensor i = arange(3);
  EXPECT_NE(error_of([&] { i.add_(0.5); }).find("losing information"), std::string::npos);
  EXPECT_NE(error_of([&] { i.add_(ones({2, 3}, kInt64)); }).find("cannot grow"), std::string::npos);
}

TEST(Allocator, ReusesFreedBlocks) {
  auto& a = CpuAllocator::instance();
  { Tensor t = Tensor::empty({1 << 20}); }
  auto before = a.stats();
  { Tensor t = Tensor::empty({1 << 20}); }
  auto after = a.stats();
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
#endif
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
}

TEST(ThreadPool, CoversRangeOnceAndPropagatesErrors) {
  set_num_threads(2);
  std::vector<int> hits(100000, 0);
  parallel_for(0, 100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(parallel_for(0, 100000, 10, [](int64_t b, int64_t) {
                 if (b > 0) throw Error("boom");
               }),
               Error);
  // Results do not depend on the thread count.
  Tensor x = arange(300000).to(kFloat64) * 1e-3;
  set_num_threads(1);
  double one = exp(x).sum().item<double>();
  set_num_threads(2);
  EXPECT_EQ(exp(x).sum().item<double>(), one);
}

TEST(Dispatch, RefusesMixedDevicesAndMissingKernels) {
  EXPECT_NE(error_of([] { zeros({2}) + zeros({3}); }).find("cannot be broadcast"), std::string::npos);
  EXPECT_NE(error_of([] { matmul(zeros({2, 3}), zeros({2, 3})); }).find("inner dims differ"), std::string::npos);
  Tensor mixed[2] = {zeros({2}), zeros({2}, kFloat64)};
  EXPECT_NE(error_of([&] { dispatch1(*find_op("add"), mixed); }).find("one dtype"), std::string::npos);
}

}  // namespace
}  // namespace kiln
