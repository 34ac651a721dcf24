// Random factories (rand, randn, randint, bernoulli) and linspace/eye: table cases whose
// references recompute the documented Philox streams, pinned first values, seeding and
// thread-count independence, sample statistics, and errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>

#include "harness.h"

namespace kiln::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using RefFn = std::function<Ref(const std::vector<Ref>&)>;

constexpr uint64_t kSeed = 1234;

// The streams of kiln/ops/factory.h, written out independently: element i of a draw that
// starts at counter 0.
std::array<uint32_t, 4> block(uint64_t i) {
  return Generator::philox(kSeed, i);
}
double unit53(uint32_t hi, uint32_t lo) {
  return static_cast<double>((static_cast<uint64_t>(hi) << 21) | (lo >> 11)) /
         9007199254740992.0;  // 2^53
}
double ref_rand_f32(int64_t i) {
  return static_cast<double>(block(i / 4)[i % 4] >> 8) / 16777216.0;
}  // 2^24
double ref_rand_f64(int64_t i) {
  auto w = block(i / 2);
  return unit53(w[2 * (i % 2)], w[2 * (i % 2) + 1]);
}
double ref_randn(int64_t i) {
  auto w = block(i / 2);
  double u1 = 1 - unit53(w[0], w[1]), u2 = unit53(w[2], w[3]);
  double r = std::sqrt(-2 * std::log(u1)), theta = 2 * M_PI * u2;
  return i % 2 == 0 ? r * std::cos(theta) : r * std::sin(theta);
}
double ref_randint(int64_t i, int64_t low, int64_t high) {
  auto w = block(i / 2);
  uint64_t r = (static_cast<uint64_t>(w[2 * (i % 2)]) << 32) | w[2 * (i % 2) + 1];
  return static_cast<double>(low + static_cast<int64_t>(r % static_cast<uint64_t>(high - low)));
}

Ref ref_stream(Shape shape, const std::function<double(int64_t)>& f) {
  Ref r{shape, std::vector<double>(static_cast<size_t>(numel(shape)))};
  for (int64_t i = 0; i < r.numel(); ++i) r.v[i] = f(i);
  return r;
}

OpCase random_case(std::string op, std::string label, std::vector<std::vector<Input>> runs, Fn fn,
                   RefFn ref, DType dtype, double tol = 1e-6) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  c.dtypes = {dtype};
  c.gradcheck = false;
  c.noncontiguous = false;
  c.f32_tol = tol;
  c.f64_tol = 1e-12;
  return c;
}

// p from the input (a transposed view when non-contiguous) mapped into (0, 1); the stream
// depends on p's dtype.
OpCase bernoulli_case(DType dtype) {
  bool f32 = dtype == kFloat32;
  OpCase c = random_case(
      "bernoulli", f32 ? "tensor_p_float32" : "tensor_p_float64", {{{{40, 30}, Gen::Unit}}},
      [](const std::vector<Tensor>& in) {
        Generator g(kSeed);
        return kiln::bernoulli((in[0] + 1) / 2, &g);
      },
      [f32](const std::vector<Ref>& r) {
        Ref out = r[0];
        for (int64_t i = 0; i < out.numel(); ++i) {
          double p = f32 ? static_cast<double>((static_cast<float>(r[0].v[i]) + 1.0f) / 2.0f)
                         : (r[0].v[i] + 1) / 2;
          out.v[i] = (f32 ? ref_rand_f32(i) : ref_rand_f64(i)) < p ? 1 : 0;
        }
        return out;
      },
      dtype, 0);
  c.noncontiguous = true;
  return c;
}

// Each fn uses a fresh generator, so every call sees the stream from counter 0.
Register random_cases({
    random_case(
        "rand", "float32", {{}},
        [](const std::vector<Tensor>&) {
          Generator g(kSeed);
          return kiln::rand({3, 5}, kFloat32, &g);  // 15 values: the last block is partial
        },
        [](const std::vector<Ref>&) {
          return ref_stream({3, 5}, ref_rand_f32);
        },
        kFloat32, 0),
    random_case(
        "rand", "float64_big", {{}},
        [](const std::vector<Tensor>&) {
          Generator g(kSeed);
          return kiln::rand({301, 1001}, kFloat64, &g);  // threaded
        },
        [](const std::vector<Ref>&) {
          return ref_stream({301, 1001}, ref_rand_f64);
        },
        kFloat64),
    random_case(
        "randn", "float64", {{}},
        [](const std::vector<Tensor>&) {
          Generator g(kSeed);
          return kiln::randn({7}, kFloat64, &g);
        },
        [](const std::vector<Ref>&) { return ref_stream({7}, ref_randn); }, kFloat64),
    random_case(
        "randn", "float32_big", {{}},
        [](const std::vector<Tensor>&) {
          Generator g(kSeed);
          return kiln::randn({100001}, kFloat32, &g);
        },
        [](const std::vector<Ref>&) { return ref_stream({100001}, ref_randn); }, kFloat32, 1e-5),
    random_case(
        "randint", "range", {{}},
        [](const std::vector<Tensor>&) {
          Generator g(kSeed);
          return kiln::randint(-3, 10, {4, 5}, kInt64, &g);
        },
        [](const std::vector<Ref>&) {
          return ref_stream({4, 5}, [](int64_t i) { return ref_randint(i, -3, 10); });
        },
        kInt64),
    bernoulli_case(kFloat32),
    bernoulli_case(kFloat64),
    random_case(
        "linspace", "values", {{}},
        [](const std::vector<Tensor>&) { return kiln::linspace(-1, 2, 7, kFloat64); },
        [](const std::vector<Ref>&) {
          return Ref{Shape{7}, {-1, -0.5, 0, 0.5, 1, 1.5, 2}};
        },
        kFloat64),
    random_case(
        "linspace", "one_and_zero_steps", {{}},
        [](const std::vector<Tensor>&) {
          return kiln::cat({kiln::linspace(3, 9, 1), kiln::linspace(0, 1, 0)});
        },
        [](const std::vector<Ref>&) {
          return Ref{Shape{1}, {3}};
        },
        kFloat32),
    random_case(
        "eye", "rect", {{}}, [](const std::vector<Tensor>&) { return kiln::eye(2, 3, kInt64); },
        [](const std::vector<Ref>&) {
          return Ref{Shape{2, 3}, {1, 0, 0, 0, 1, 0}};
        },
        kInt64),
});

// ---- pinned values: a change to Philox or to a stream layout fails here ----

// Values computed by an independent Python Philox4x32-10 that reproduces Random123's
// known-answer test (key 0, counter 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8).
TEST(Random, PhiloxKnownAnswer) {
  EXPECT_EQ(Generator::philox(0, 0),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Random, PinnedFirstValues) {
  Generator g(42);
  std::vector<float> u = kiln::rand({4}, kFloat32, &g).to_vector<float>();
  std::vector<float> u_want = {0.6129598617553711f, 0.4685865044593811f, 0.07323169708251953f,
                               0.3408614993095398f};
  EXPECT_EQ(u, u_want);
  g.manual_seed(42);
  std::vector<double> n = kiln::randn({3}, kFloat64, &g).to_vector<double>();
  std::vector<double> n_want = {1.234541820550271, 0.6118499355304586, -2.9550533475152116};
  for (size_t i = 0; i < n.size(); ++i) EXPECT_NEAR(n[i], n_want[i], 1e-12) << i;
  g.manual_seed(42);
  EXPECT_EQ(kiln::randint(0, 1000, {5}, kInt64, &g).to_vector<int64_t>(),
            (std::vector<int64_t>{99, 639, 213, 475, 507}));
}

// ---- seeding, thread-count independence, the default generator ----

TEST(Random, SameSeedSameSequenceAnyThreadCount) {
  int saved = num_threads();
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2, 1}) {
    set_num_threads(threads);
    Generator g(7);
    Tensor a = kiln::randn({500, 400}, kFloat64, &g);  // above the parallel grain
    Tensor b = kiln::rand({333, 301}, kFloat32, &g);
    Tensor p = kiln::full({300, 300}, 0.3);
    Tensor c = kiln::bernoulli(p, &g);
    Tensor d = kiln::randint(5, {200, 200}, kInt64, &g);
    std::vector<double> all = a.to_vector<double>();
    for (Tensor t : {b, c, d}) {
      std::vector<double> v = t.to_vector<double>();
      all.insert(all.end(), v.begin(), v.end());
    }
    runs.push_back(std::move(all));
  }
  set_num_threads(saved);
  EXPECT_TRUE(runs[0] == runs[1]) << "results depend on the thread count";
  EXPECT_TRUE(runs[0] == runs[2]);
}

TEST(Random, DrawsAdvanceTheGeneratorAndSeedsDiffer) {
  Generator g(1);
  Tensor a = kiln::rand({10}, kFloat32, &g);
  Tensor b = kiln::rand({10}, kFloat32, &g);
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(g.offset(), 6u);  // ceil(10 / 4) blocks per draw
  Generator h(2);
  EXPECT_NE(kiln::rand({10}, kFloat32, &h).to_vector<float>(), a.to_vector<float>());
  // The default generator: kiln::manual_seed repeats it.
  kiln::manual_seed(99);
  std::vector<double> first = kiln::randn({6}).to_vector<double>();
  kiln::manual_seed(99);
  EXPECT_EQ(kiln::randn({6}).to_vector<double>(), first);
  Generator same(99);
  EXPECT_EQ(kiln::randn({6}, {}, &same).to_vector<double>(), first);
}

// ---- statistics of 100k samples ----

struct Moments {
  double mean = 0, var = 0;
};
Moments moments(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

TEST(Random, UniformAndNormalMoments) {
  Generator g(2024);
  const int64_t n = 100000;
  for (DType d : {kFloat32, kFloat64}) {
    Tensor u = kiln::rand({n}, d, &g);
    Moments mu = moments(u);
    // Standard errors: mean 0.0009, variance 0.0003; bounds are ~5 sigma.
    EXPECT_NEAR(mu.mean, 0.5, 0.005);
    EXPECT_NEAR(mu.var, 1.0 / 12, 0.0015);
    EXPECT_GE(u.amin().item<double>(), 0.0);
    EXPECT_LT(u.amax().item<double>(), 1.0);
    Tensor z = kiln::randn({n}, d, &g);
    Moments mz = moments(z);
    EXPECT_NEAR(mz.mean, 0, 0.016);
    EXPECT_NEAR(mz.var, 1, 0.025);
    // Tails: about 4.55% of samples beyond 2 sigma.
    double beyond = (kiln::abs(z) > 2).to(kFloat64).mean().item<double>();
    EXPECT_NEAR(beyond, 0.0455, 0.004);
  }
}

TEST(Random, RandintRangeAndUniformity) {
  Generator g(5);
  Tensor r = kiln::randint(-2, 3, {100000}, kInt64, &g);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.amin().item<int64_t>(), -2);
  EXPECT_EQ(r.amax().item<int64_t>(), 2);
  for (int64_t v = -2; v <= 2; ++v) {
    double share = (r == v).to(kFloat64).mean().item<double>();
    EXPECT_NEAR(share, 0.2, 0.007) << v;  // 5.5 sigma
  }
  Tensor f = kiln::randint(10, {1000}, kFloat32, &g);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(((f >= 0) & (f < 10) & (f == kiln::floor(f))).all().item<bool>());
}

TEST(Random, BernoulliRate) {
  Generator g(11);
  for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    Tensor b = kiln::bernoulli(kiln::zeros({100000}), p, &g);
    EXPECT_EQ(b.dtype(), kFloat32);
    double rate = b.mean().item<double>();
    EXPECT_NEAR(rate, p, 0.005) << p;
    EXPECT_TRUE(((b == 0) | (b == 1)).all().item<bool>());
  }
  // Per-element probabilities: p = 0 never fires, p = 1 always does.
  Tensor p = kiln::tensor({0.0, 1.0}, kFloat64).expand({50000, 2}).contiguous();
  Tensor b = kiln::bernoulli(p, &g);
  EXPECT_EQ(b.dtype(), kFloat64);
  EXPECT_EQ(b.sum({0}).to_vector<double>(), (std::vector<double>{0, 50000}));
  EXPECT_EQ(kiln::bernoulli(kiln::zeros({3}, kInt64), 1.0, &g).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 1}));
}

TEST(Random, RandomOpsAreNotDifferentiableAndHonourOptions) {
  Tensor r = kiln::rand({3}, TensorOptions(kFloat64).with_requires_grad(true));
  EXPECT_TRUE(r.requires_grad());
  EXPECT_TRUE(r.is_leaf());
  Tensor p = kiln::full({3}, 0.5).requires_grad_();
  Tensor b = kiln::bernoulli(p);
  EXPECT_FALSE(b.requires_grad());
  EXPECT_TRUE(find_op("rand")->random);
  EXPECT_FALSE(find_op("randn")->differentiable);
  EXPECT_EQ(find_op("bernoulli")->lowering, LoweringClass::Random);
  EXPECT_FALSE(find_op("eye")->random);
  Tensor e = kiln::eye(3);
  EXPECT_EQ(e.dtype(), kFloat32);
  EXPECT_EQ(e.sum().item<double>(), 3);
  Tensor l = kiln::linspace(0, 1, 5);
  EXPECT_EQ(l.to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(kiln::linspace(0, 10, 4, kInt64).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 6, 10}));
}

// ---- errors ----

TEST(RandomErrors, Messages) {
  expect_error([] { kiln::randint(5, 5, {2}); }, {"[randint]", "low < high", "low = 5", "Fix:"});
  expect_error([] { kiln::rand({2, -1}); }, {"[rand]", "non-negative", "[2, -1]"});
  expect_error([] { kiln::randn({2}, kInt64); }, {"[randn]", "int64", "randint"});
  expect_error([] { kiln::randint(0, 3, {2}, kBool); }, {"[randint]", "bool"});
  expect_error(
      [] {
        kiln::bernoulli(kiln::tensor({0.5, 1.5}));
      },
      {"[bernoulli]", "[0, 1]", "1.5", "element 1", "Fix:"});
  expect_error([] { kiln::bernoulli(kiln::zeros({2}), -0.1); }, {"[bernoulli]", "-0.1"});
  expect_error([] { kiln::linspace(0, 1, -2); }, {"[linspace]", "non-negative", "-2"});
  expect_error([] { kiln::eye(-1); }, {"[eye]", "non-negative"});
}

}  // namespace
}  // namespace kiln::testing
