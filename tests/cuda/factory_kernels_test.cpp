// The eager CUDA factory kernels (arange, linspace, eye) and random kernels (rand, randn,
// randint, bernoulli, dropout), checked without a GPU as the other generated kernels are
// (cuda/generated_kernels.h): NVRTC and ptxas accept them, and on the host they give what the
// CPU kernels give. For the random ones that is the point: a seed draws the same numbers on
// either device, bit for bit (randn to float64's last bits: its math is libdevice's on a GPU).
#include "kiln/cuda/factory_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/factory.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

struct Made {
  FactoryKernel kind;
  DType dtype;
  std::string name;
};

std::vector<Made> every_kernel() {
  std::vector<Made> out;
  auto add = [&](FactoryKernel kind, const char* op, std::vector<DType> dtypes) {
    for (DType d : dtypes) out.push_back({kind, d, std::string(op) + "_" + std::string(dtype_name(d))});
  };
  const std::vector<DType> numeric = {kInt32, kInt64, kFloat32, kFloat64, kFloat16, kBFloat16};
  add(FactoryKernel::Arange, "arange", numeric);
  add(FactoryKernel::Linspace, "linspace", numeric);
  add(FactoryKernel::Eye, "eye", {kBool, kInt64, kFloat32, kFloat64, kFloat16});
  add(FactoryKernel::Rand, "rand", {kFloat32, kFloat64});
  add(FactoryKernel::Randn, "randn", {kFloat32, kFloat64});
  add(FactoryKernel::Randint, "randint", {kInt32, kInt64, kFloat32, kFloat64});
  add(FactoryKernel::Bernoulli, "bernoulli", {kFloat32, kFloat64});
  add(FactoryKernel::Dropout, "dropout", {kFloat32, kFloat64});
  return out;
}

std::string sources() {
  std::string s;
  for (const Made& m : every_kernel()) s += factory_kernel_source(m.kind, m.dtype, m.name);
  return s;
}

TEST(CudaFactoryKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  init();
  for (const OpDef* op : {&ops::arange, &ops::linspace, &ops::eye, &ops::rand, &ops::randn,
                          &ops::randint, &ops::bernoulli, &ops::dropout})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  std::vector<std::string> names;
  for (const Made& m : every_kernel()) names.push_back(m.name);
  const std::string skipped = expect_gpu_toolchain_accepts(sources(), names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

TEST(CudaFactoryKernels, RandomKernelsRefuseDtypesTheCpuDoesNotDraw) {
  expect_error([] { factory_kernel_source(FactoryKernel::Dropout, kFloat16, "d"); },
               {"[cuda] the dropout kernels take float32 or float64, got float16"});
  expect_error([] { factory_kernel_source(FactoryKernel::Rand, kInt64, "r"); },
               {"the random kernels take float32 or float64, got int64"});
}

class CudaFactoryOnHost : public HostKernelSuite {
 protected:
  static void SetUpTestSuite() { build("cuda_factory", sources()); }
  static void TearDownTestSuite() { release(); }
};

TEST_F(CudaFactoryOnHost, ArangeLinspaceAndEyeAreTheCpuKernels) {
  using Arange = void (*)(void*, long long, double, double);
  using Linspace = void (*)(void*, long long, double, double, double);
  using Eye = void (*)(void*, long long, long long);
  // The dtypes the CPU kernels make (float16 and bfloat16 are storage types there).
  for (DType d : {kInt32, kInt64, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const std::string suffix = "_" + std::string(dtype_name(d));
    const Tensor want = arange(-3, 40, 3, d);
    Tensor got = Tensor::empty(want.sizes(), d);
    entry<Arange>("arange" + suffix)(got.raw_data(), got.numel(), -3, 3);
    EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
    for (int64_t steps : {1, 2, 7, 50}) {
      const Tensor line = linspace(-1.5, 2.25, steps, d);
      Tensor mine = Tensor::empty(line.sizes(), d);
      const double step = steps > 1 ? 3.75 / static_cast<double>(steps - 1) : 0;
      entry<Linspace>("linspace" + suffix)(mine.raw_data(), steps, -1.5, 2.25, step);
      // The CPU kernels may contract a multiply-add into one rounding (-march=native), which
      // shows near 0, where start + step * i cancels.
      count_mismatches(mine.to_vector<double>(), line.to_vector<double>(), 1e-15, 1e-15,
                       "linspace " + std::to_string(steps));
      EXPECT_EQ(mine.to_vector<double>().back(), line.to_vector<double>().back());
    }
  }
  for (DType d : {kBool, kInt64, kFloat32, kFloat64}) {
    const Tensor want = eye(3, 5, d);
    Tensor got = Tensor::empty({3, 5}, d);
    entry<Eye>("eye_" + std::string(dtype_name(d)))(got.raw_data(), 15, 5);
    EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << dtype_name(d);
  }
}

// The CPU op drawn from a generator at `seed`, and the kernel given that seed's first block.
TEST_F(CudaFactoryOnHost, RandRandnAndRandintDrawTheCpuStreams) {
  using Draw = void (*)(void*, long long, unsigned long long, unsigned long long);
  using DrawInt = void (*)(void*, long long, unsigned long long, unsigned long long, long long,
                           unsigned long long);
  const uint64_t seed = 0x1234abcd5678ull;
  for (int64_t n : {1, 7, 1001}) {
    for (DType d : {kFloat32, kFloat64}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " n=" + std::to_string(n));
      const std::string suffix = "_" + std::string(dtype_name(d));
      Generator g(seed);
      const Tensor uniform = rand({n}, d, &g);
      Tensor got = Tensor::empty({n}, d);
      entry<Draw>("rand" + suffix)(got.raw_data(), n, seed, 0);
      EXPECT_EQ(got.to_vector<double>(), uniform.to_vector<double>());

      // The generator moved past rand's blocks; randn starts where it stands.
      const uint64_t first = g.offset();
      const Tensor normal = randn({n}, d, &g);
      entry<Draw>("randn" + suffix)(got.raw_data(), n, seed, first);
      count_mismatches(got.to_vector<double>(), normal.to_vector<double>(), 1e-14, 1e-15, "randn");
    }
    for (DType d : {kInt32, kInt64, kFloat32, kFloat64}) {
      Generator g(seed);
      const Tensor want = randint(-50, 1000000007, {n}, d, &g);
      Tensor got = Tensor::empty({n}, d);
      entry<DrawInt>("randint_" + std::string(dtype_name(d)))(got.raw_data(), n, seed, 0, -50,
                                                              1000000057ull);
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << dtype_name(d);
    }
  }
}

TEST_F(CudaFactoryOnHost, BernoulliDrawsTheCpuStreamAndFlagsProbabilitiesOutsideZeroOne) {
  using Draw = void (*)(const void*, long long, void*, long long, unsigned long long,
                        unsigned long long, long long*);
  const uint64_t seed = 99;
  for (DType d : {kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const auto draw = entry<Draw>("bernoulli_" + std::string(dtype_name(d)));
    const Tensor p = rand({203}, d);
    Generator g(seed);
    const Tensor want = bernoulli(p, &g);
    Tensor got = Tensor::empty({203}, d);
    long long bad = LLONG_MAX;  // "none yet" (failure_flag)
    draw(p.raw_data(), 1, got.raw_data(), 203, seed, 0, &bad);
    EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
    EXPECT_EQ(bad, LLONG_MAX);
    // One probability for every element (a broadcast scalar, read with step 0).
    const Tensor half = Tensor::scalar(0.5, d);
    Generator g2(seed);
    const Tensor want_half = bernoulli(half.expand({203}), &g2);
    draw(half.raw_data(), 0, got.raw_data(), 203, seed, 0, &bad);
    EXPECT_EQ(got.to_vector<double>(), want_half.to_vector<double>());
    // The first probability outside [0, 1] (or NaN) is flagged with its element.
    Tensor wrong = p.clone();
    wrong.select(0, 150).fill_(NAN);
    wrong.select(0, 170).fill_(-1);
    draw(wrong.raw_data(), 1, got.raw_data(), 203, seed, 0, &bad);
    EXPECT_EQ(bad, 150);
  }
}

TEST_F(CudaFactoryOnHost, DropoutKeepsAndScalesWhatTheCpuKernelKeeps) {
  using Drop = void (*)(const void*, void*, void*, long long, unsigned long long, unsigned long long,
                        float, double);
  for (DType d : {kFloat32, kFloat64}) {
    for (double p : {0.0, 0.3, 1.0}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " p=" + std::to_string(p));
      const Tensor x = randn({1001}, d);
      ops::DropoutAttrs a;
      a.p = p;
      a.seed = 4242;
      a.offset = 17;
      const Tensors want = dispatch(ops::dropout, std::vector<Tensor>{x}, a);
      Tensor out = Tensor::empty({1001}, d), mask = Tensor::empty({1001}, kBool);
      entry<Drop>("dropout_" + std::string(dtype_name(d)))(x.raw_data(), out.raw_data(), mask.raw_data(),
                                                           1001, 4242, 17, static_cast<float>(p),
                                                           p < 1 ? 1 / (1 - p) : 0);
      EXPECT_EQ(out.to_vector<double>(), want[0].to_vector<double>());
      EXPECT_EQ(mask.to_vector<bool>(), want[1].to_vector<bool>());
    }
  }
}

}  // namespace
}  // namespace kiln::cuda
