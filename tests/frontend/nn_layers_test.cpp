// kiln::nn layers: outputs against hand-computed references, PyTorch's default
// initialization bounds, train/eval behaviour (Dropout, BatchNorm running statistics),
// gradients reaching the parameters, printouts and every constructor/input error.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace F = kiln::nn::functional;

Tensor f64(std::vector<double> v, std::vector<int64_t> shape) {
  return Tensor::from_vector<double>(v, shape);
}

void set(const Tensor& param, std::vector<double> v) {
  NoGradGuard g;
  param.detach().copy_(Tensor::from_vector<double>(v, param.sizes()).to(param.dtype()));
}

void expect_values(const Tensor& t, std::vector<double> want, double tol = 1e-9) {
  auto got = t.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// ---- Linear ----

TEST(NnLayers, LinearValuesAndGradients) {
  nn::Linear fc(2, 1);
  fc.to(kFloat64);
  set(fc.weight, {1, 2});
  set(fc.bias, {0.5});
  Tensor x = f64({1, 1, 2, 0}, {2, 2});
  Tensor y = fc(x);
  expect_values(y, {3.5, 2.5});
  y.sum().backward();
  EXPECT_EQ(fc.weight.grad().shape(), (Shape{1, 2}));
  expect_values(fc.weight.grad(), {3, 1});  // sum of the input rows
  expect_values(fc.bias.grad(), {2});
  nn::Linear no_bias(2, 3, false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias(kiln::ones({4, 2})).shape(), (Shape{4, 3}));
  EXPECT_EQ(no_bias.repr(), "Linear(in_features=2, out_features=3, bias=false)");
}

TEST(NnLayers, LinearInitFollowsPyTorch) {
  manual_seed(7);
  nn::Linear a(256, 128);
  manual_seed(7);
  nn::Linear b(256, 128);
  EXPECT_EQ(a.weight.to_vector<double>(), b.weight.to_vector<double>());  // seeded
  double bound = 1.0 / std::sqrt(256.0);
  auto w = a.weight.to_vector<double>();
  double sum = 0, sq = 0, maxabs = 0;
  for (double v : w) {
    sum += v;
    sq += v * v;
    maxabs = std::max(maxabs, std::abs(v));
  }
  double n = static_cast<double>(w.size());
  EXPECT_LE(maxabs, bound);
  EXPECT_GT(maxabs, 0.95 * bound);
  EXPECT_NEAR(sum / n, 0.0, 0.01 * bound * 10);
  EXPECT_NEAR(sq / n, bound * bound / 3, 0.05 * bound * bound / 3);  // U(-b, b) variance
  for (double v : a.bias.to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  expect_error([] { nn::Linear(-1, 2); }, {"[Linear] expected non-negative", "Fix:"});
  expect_error(
      [&] {
        a(kiln::ones({2, 3}));
      },
      {"[Linear] expected an input whose last dim is in_features = 256", "float32[2, 3]",
       "Linear(3, 128)"});
}

// Integer and bool inputs are refused, as PyTorch refuses them, instead of being promoted
// silently; float64 inputs still promote as before.
TEST(NnLayers, FloatLayersRefuseIntegerInputs) {
  nn::Linear linear(4, 2);
  Tensor ints = kiln::ones({2, 4}).to(DType::Int64);
  expect_error([&] { linear(ints); },
               {"[Linear] expected a floating-point input (float32, like its weight), found "
                "int64[2, 4]",
                "x.to(kiln::kFloat32)"});
  expect_error([&] { linear(kiln::ones({2, 4}).to(DType::Bool)); }, {"found bool[2, 4]"});
  nn::LazyLinear lazy(3);
  expect_error([&] { lazy(ints); }, {"[LazyLinear] expected a floating-point input"});
  EXPECT_FALSE(lazy.initialized());  // refused before it took a shape from the input
  nn::Conv2d conv(1, 2, 3);
  expect_error([&] { conv(kiln::ones({1, 1, 5, 5}).to(DType::Int32)); },
               {"[Conv2d] expected a floating-point input", "int32[1, 1, 5, 5]"});
  nn::LayerNorm norm(4);
  expect_error([&] { norm(ints); }, {"[LayerNorm] expected a floating-point input"});
  nn::BatchNorm2d bn(1);
  expect_error([&] { bn(kiln::ones({2, 1, 3, 3}).to(DType::Int64)); },
               {"[BatchNorm2d] expected a floating-point input"});
  EXPECT_EQ(linear(kiln::ones({2, 4})).dtype(), DType::Float32);
}

// ---- Conv2d ----

TEST(NnLayers, Conv2dValues) {
  nn::Conv2d conv(1, 1, 2);
  conv.to(kFloat64);
  set(conv.weight, {1, 0, 0, -1});  // x[i][j] - x[i+1][j+1]
  set(conv.bias, {10});
  Tensor x = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  expect_values(conv(x), {6, 6, 6, 6});
  conv(x).sum().backward();
  EXPECT_EQ(conv.weight.grad().shape(), (Shape{1, 1, 2, 2}));
  expect_values(conv.weight.grad(), {1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9});
  expect_values(conv.bias.grad(), {4});
  EXPECT_EQ(conv.repr(), "Conv2d(1, 1, kernel_size=(2, 2), stride=(1, 1))");
}

TEST(NnLayers, Conv2dPaddingModesAndShapes) {
  Tensor x = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  nn::Conv2d rep(1, 1, 1, {.padding = 1, .bias = false, .padding_mode = "replicate"});
  rep.to(kFloat64);
  set(rep.weight, {1});
  expect_values(rep(x), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  nn::Conv2d refl(1, 1, 1, {.padding = 1, .bias = false, .padding_mode = "reflect"});
  refl.to(kFloat64);
  set(refl.weight, {1});
  expect_values(refl(x), {4, 3, 4, 3, 2, 1, 2, 1, 4, 3, 4, 3, 2, 1, 2, 1});
  nn::Conv2d zeros(1, 1, 1, {.padding = 1, .bias = false});
  zeros.to(kFloat64);
  set(zeros.weight, {1});
  expect_values(zeros(x), {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0});

  nn::Conv2d strided(4, 8, {3, 5}, {.stride = 2, .padding = {1, 2}, .groups = 2});
  EXPECT_EQ(strided.weight.shape(), (Shape{8, 2, 3, 5}));
  EXPECT_EQ(strided(kiln::randn({2, 4, 9, 9})).shape(), (Shape{2, 8, 5, 5}));
  EXPECT_EQ(strided.repr(),
            "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 2), "
            "groups=2)");
  EXPECT_EQ(rep.repr(),
            "Conv2d(1, 1, kernel_size=(1, 1), stride=(1, 1), padding=(1, 1), "
            "bias=false, padding_mode=replicate)");
  // Init bound 1/sqrt(fan_in), fan_in = in_channels / groups * kh * kw = 30.
  double bound = 1.0 / std::sqrt(30.0);
  for (double v : strided.weight.to_vector<double>()) EXPECT_LE(std::abs(v), bound);
}

TEST(NnLayers, Conv2dErrors) {
  expect_error([] { nn::Conv2d(3, 4, 3, {.groups = 2}); },
               {"[Conv2d] in_channels (3) and out_channels (4) must be divisible by groups (2)"});
  expect_error([] { nn::Conv2d(3, 4, 3, {.groups = 0}); }, {"groups must be positive"});
  expect_error([] { nn::Conv2d(3, 4, 3, {.padding_mode = "mirror"}); },
               {"padding_mode must be", "\"mirror\""});
  expect_error(
      [] {
        nn::Conv2d(3, 4, {1, 2, 3});
      },
      {"[Conv2d] kernel_size takes one value or two (height, width), got 3"});
}

// ---- pooling, flatten, identity ----

TEST(NnLayers, Pooling) {
  Tensor x = kiln::arange(0, 16).to(kFloat64).reshape({1, 1, 4, 4});
  nn::MaxPool2d maxpool(2);
  expect_values(maxpool(x), {5, 7, 13, 15});
  nn::AvgPool2d avgpool(2);
  expect_values(avgpool(x), {2.5, 4.5, 10.5, 12.5});
  nn::AvgPool2d avg_stride1(2, {.stride = 1});
  EXPECT_EQ(avg_stride1(x).shape(), (Shape{1, 1, 3, 3}));
  nn::AdaptiveAvgPool2d gap(1);
  expect_values(gap(x), {7.5});
  nn::AdaptiveAvgPool2d half({2, 2});
  expect_values(half(x), {2.5, 4.5, 10.5, 12.5});
  EXPECT_EQ(maxpool.repr(),
            "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
            "ceil_mode=false)");
  EXPECT_EQ(avg_stride1.repr(), "AvgPool2d(kernel_size=2, stride=1, padding=0)");
  EXPECT_EQ(half.repr(), "AdaptiveAvgPool2d(output_size=(2, 2))");
  nn::Flatten flat;
  EXPECT_EQ(flat(kiln::ones({2, 3, 4})).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::Flatten(0)(kiln::ones({2, 3, 4})).shape(), (Shape{24}));
  EXPECT_EQ(flat.repr(), "Flatten(start_dim=1, end_dim=-1)");
  nn::Identity id;
  EXPECT_TRUE(id(x).is_same(x));
  EXPECT_EQ(id.repr(), "Identity()");
}

// ---- activations ----

TEST(NnLayers, Activations) {
  std::vector<double> v = {-2, -0.5, 0, 0.5, 2};
  Tensor x = f64(v, {5});
  auto ref = [&](auto fn) {
    std::vector<double> out;
    for (double e : v) out.push_back(fn(e));
    return out;
  };
  expect_values(nn::ReLU()(x), ref([](double e) { return e > 0 ? e : 0; }));
  expect_values(nn::GELU()(x),
                ref([](double e) { return 0.5 * e * (1 + std::erf(e / std::sqrt(2.0))); }), 1e-7);
  expect_values(nn::GELU(GeluApproximation::Tanh)(x), ref([](double e) {
                  return 0.5 * e *
                         (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
                }),
                1e-7);
  expect_values(nn::SiLU()(x), ref([](double e) { return e / (1 + std::exp(-e)); }));
  expect_values(nn::Sigmoid()(x), ref([](double e) { return 1 / (1 + std::exp(-e)); }));
  expect_values(nn::Tanh()(x), ref([](double e) { return std::tanh(e); }));
  Tensor m = f64({1, 2, 3, 1, 1, 1}, {2, 3});
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expect_values(nn::Softmax(1)(m), {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z,
                                    1.0 / 3, 1.0 / 3, 1.0 / 3});
  expect_values(nn::LogSoftmax(1)(m), {1 - std::log(z), 2 - std::log(z), 3 - std::log(z),
                                       -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  expect_values(nn::Softmax(0)(m),
                {0.5, std::exp(1.0) / (std::exp(1.0) + 1), std::exp(2.0) / (std::exp(2.0) + 1), 0.5,
                 1 / (std::exp(1.0) + 1), 1 / (std::exp(2.0) + 1)});
  EXPECT_EQ(nn::ReLU().repr(), "ReLU()");
  EXPECT_EQ(nn::GELU().repr(), "GELU(approximate='none')");
  EXPECT_EQ(nn::GELU(GeluApproximation::Tanh).repr(), "GELU(approximate='tanh')");
  EXPECT_EQ(nn::Softmax(-1).repr(), "Softmax(dim=-1)");
  EXPECT_EQ(nn::LogSoftmax(1).repr(), "LogSoftmax(dim=1)");
}

// ---- Dropout ----

TEST(NnLayers, Dropout) {
  nn::Dropout drop(0.25);
  Tensor x = kiln::ones({4000}, kFloat64);
  manual_seed(3);
  auto a = drop(x).to_vector<double>();
  manual_seed(3);
  auto b = drop(x).to_vector<double>();
  EXPECT_EQ(a, b);  // the seeded default generator
  int zeros = 0;
  for (double v : a) {
    EXPECT_TRUE(v == 0.0 || std::abs(v - 1 / 0.75) < 1e-12);
    zeros += v == 0.0;
  }
  EXPECT_NEAR(zeros / 4000.0, 0.25, 0.03);
  drop.eval();
  expect_values(drop(x), std::vector<double>(4000, 1.0));
  EXPECT_EQ(drop.repr(), "Dropout(p=0.25, inplace=false)");
  EXPECT_EQ(nn::Dropout().p, 0.5);
  expect_error([] { nn::Dropout(1.5); }, {"[Dropout] the dropout probability must lie in [0, 1], "
                                          "got 1.5"});
}

// ---- BatchNorm ----

TEST(NnLayers, BatchNorm1dTrainingAndEval) {
  nn::BatchNorm1d bn(2);
  bn.to(kFloat64);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), kInt64);
  // Channel 0: 1, 2, 3, 6 (mean 3, biased var 3.5, unbiased 14/3); channel 1: all 4.
  Tensor x = f64({1, 4, 2, 4, 3, 4, 6, 4}, {4, 2});
  Tensor y = bn(x);
  double s = std::sqrt(3.5 + 1e-5);
  expect_values(y, {-2 / s, 0, -1 / s, 0, 0, 0, 3 / s, 0}, 1e-6);
  expect_values(bn.running_mean, {0.1 * 3, 0.1 * 4});
  expect_values(bn.running_var, {0.9 + 0.1 * 14.0 / 3, 0.9});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // Gradients reach weight and bias.
  (y * f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})).sum().backward();
  expect_values(bn.bias.grad(), {1 + 3 + 5 + 7, 2 + 4 + 6 + 8});
  EXPECT_EQ(bn.weight.grad().shape(), (Shape{2}));
  // eval(): the running statistics, no update.
  bn.eval();
  Tensor ye = bn(x);
  double rv0 = 0.9 + 0.1 * 14.0 / 3;
  expect_values(ye,
                {(1 - 0.3) / std::sqrt(rv0 + 1e-5), (4 - 0.4) / std::sqrt(0.9 + 1e-5),
                 (2 - 0.3) / std::sqrt(rv0 + 1e-5), (4 - 0.4) / std::sqrt(0.9 + 1e-5),
                 (3 - 0.3) / std::sqrt(rv0 + 1e-5), (4 - 0.4) / std::sqrt(0.9 + 1e-5),
                 (6 - 0.3) / std::sqrt(rv0 + 1e-5), (4 - 0.4) / std::sqrt(0.9 + 1e-5)},
                1e-6);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  EXPECT_EQ(bn.repr(),
            "BatchNorm1d(2, eps=1e-05, momentum=0.1, affine=true, "
            "track_running_stats=true)");
  std::vector<std::string> names;
  for (auto& [k, v] : bn.named_buffers()) names.push_back(k);
  EXPECT_EQ(names,
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  bn.reset_running_stats();
  expect_values(bn.running_mean, {0, 0});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
}

TEST(NnLayers, BatchNormOptions) {
  // momentum = nullopt: a cumulative average of the batch statistics.
  nn::BatchNorm1d cumulative(1, {.momentum = std::nullopt});
  cumulative.to(kFloat64);
  cumulative(f64({1, 3}, {2, 1}));  // mean 2
  expect_values(cumulative.running_mean, {2});
  cumulative(f64({5, 7}, {2, 1}));  // mean 6 -> average 4
  expect_values(cumulative.running_mean, {4});
  EXPECT_EQ(cumulative.repr(),
            "BatchNorm1d(1, eps=1e-05, momentum=None, affine=true, "
            "track_running_stats=true)");
  // No running statistics: no buffers, and eval() still normalizes with the batch's.
  nn::BatchNorm1d stateless(1, {.affine = false, .track_running_stats = false});
  EXPECT_TRUE(stateless.parameters().empty());
  EXPECT_TRUE(stateless.buffers().empty());
  stateless.eval();
  double s = std::sqrt(1.0 + 1e-5);
  expect_values(stateless(f64({1, 3}, {2, 1})), {-1 / s, 1 / s}, 1e-6);
  // 3-D input [N, C, L] for BatchNorm1d; BatchNorm2d per channel of [N, C, H, W].
  EXPECT_EQ(nn::BatchNorm1d(3)(kiln::randn({2, 3, 5})).shape(), (Shape{2, 3, 5}));
  nn::BatchNorm2d bn2(2);
  bn2.to(kFloat64);
  Tensor img = f64({0, 2, 0, 2, 10, 10, 10, 10, 4, 6, 4, 6, 10, 10, 10, 10}, {2, 2, 2, 2});
  bn2(img);
  expect_values(bn2.running_mean, {0.1 * 3, 0.1 * 10});
}

TEST(NnLayers, BatchNormErrors) {
  nn::BatchNorm1d bn1(3);
  expect_error(
      [&] {
        bn1(kiln::ones({2, 3, 4, 4}));
      },
      {"[BatchNorm1d] expected a 2D [N, C] or 3D [N, C, L] input, got 4D", "Fix: use BatchNorm2d"});
  nn::BatchNorm2d bn2(3);
  expect_error(
      [&] {
        bn2(kiln::ones({2, 3}));
      },
      {"[BatchNorm2d] expected a 4D [N, C, H, W] input, got 2D"});
  expect_error(
      [&] {
        bn2(kiln::ones({2, 4, 1, 1}));
      },
      {"[BatchNorm2d] expected 3 channels in dim 1", "Fix: build BatchNorm2d(4)"});
  expect_error([] { nn::BatchNorm2d(0); }, {"num_features must be positive"});
}

// ---- LayerNorm ----

TEST(NnLayers, LayerNorm) {
  nn::LayerNorm ln(3);
  ln.to(kFloat64);
  set(ln.weight, {1, 2, 3});
  set(ln.bias, {0, 0, 1});
  Tensor x = f64({1, 2, 3, 2, 2, 2}, {2, 3});
  double s = std::sqrt(2.0 / 3 + 1e-5);
  Tensor y = ln(x);
  expect_values(y, {-1 / s, 0, 3 / s + 1, 0, 0, 1}, 1e-6);
  y.sum().backward();
  expect_values(ln.bias.grad(), {2, 2, 2});
  EXPECT_EQ(ln.weight.grad().shape(), (Shape{3}));
  EXPECT_EQ(ln.repr(), "LayerNorm((3,), eps=1e-05, elementwise_affine=true)");
  nn::LayerNorm plain({2, 3}, {.elementwise_affine = false});
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_EQ(plain(kiln::randn({4, 2, 3})).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(plain.repr(), "LayerNorm((2, 3), eps=1e-05, elementwise_affine=false)");
  nn::LayerNorm no_bias(4, {.bias = false});
  EXPECT_EQ(no_bias.parameters().size(), 1u);
  expect_error([] { nn::LayerNorm(std::vector<int64_t>{}); }, {"normalized_shape is empty"});
}

// ---- Embedding ----

TEST(NnLayers, Embedding) {
  manual_seed(0);
  nn::Embedding emb(5, 3, {.padding_idx = -1});
  EXPECT_EQ(emb.padding_idx, 4);
  expect_values(emb.weight.select(0, 4), {0, 0, 0});
  Tensor idx = Tensor::from_vector<int64_t>({1, 4, 1, 0}, {2, 2});
  Tensor y = emb(idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  auto w = emb.weight.to_vector<double>();
  expect_values(y.select(0, 0).select(0, 0), {w[3], w[4], w[5]});
  y.sum().backward();
  // Row 1 is used twice, row 0 once, the padding row gets nothing.
  expect_values(emb.weight.grad(), {1, 1, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(emb.repr(), "Embedding(5, 3, padding_idx=4)");
  EXPECT_EQ(nn::Embedding(7, 2).repr(), "Embedding(7, 2)");
  expect_error([] { nn::Embedding(5, 3, {.padding_idx = 5}); },
               {"[Embedding] padding_idx 5 is outside [-5, 5)"});
  expect_error([] { nn::Embedding(0, 3); }, {"expected num_embeddings > 0"});
}

// ---- a small model end to end ----

TEST(NnLayers, SmallCnnTrainsOneStep) {
  manual_seed(1);
  nn::Sequential net(std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = 1}),
                     std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(64, 3));
  Tensor x = kiln::randn({2, 1, 8, 8});
  Tensor target = Tensor::from_vector<int64_t>({0, 2});
  // Train-mode forward and backward: every parameter receives its gradient.
  Tensor loss = F::cross_entropy(net(x), target);
  loss.backward();
  for (auto& [path, p] : net.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << path;
    EXPECT_EQ(p.grad().shape(), p.shape()) << path;
  }
  // In eval mode (deterministic), one SGD step lowers the loss on the same batch.
  net.eval();
  net.zero_grad();
  Tensor eval_loss = F::cross_entropy(net(x), target);
  eval_loss.backward();
  double before = eval_loss.item<double>();
  {
    NoGradGuard g;
    for (auto& p : net.parameters()) p.detach().sub_(p.grad(), 0.1);
  }
  double after = F::cross_entropy(net(x), target).item<double>();
  EXPECT_LT(after, before);
  EXPECT_EQ(net.repr(),
            "Sequential(\n"
            "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (1): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=true, "
            "track_running_stats=true)\n"
            "  (2): ReLU()\n"
            "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)\n"
            "  (4): Flatten(start_dim=1, end_dim=-1)\n"
            "  (5): Dropout(p=0.1, inplace=false)\n"
            "  (6): Linear(in_features=64, out_features=3, bias=true)\n"
            ")");
}

}  // namespace
}  // namespace kiln
