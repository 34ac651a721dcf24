// kiln::nn::functional beyond the op table: every error path of the nn ops (message
// checks), hand-computed values (cross_entropy with ignore_index and label smoothing,
// batch_norm's running-statistic update), dropout's determinism and statistics,
// embedding's padding row, and second derivatives (double backward) by finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/nn.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = kiln::nn::functional;

std::vector<double> values(const Tensor& t) {
  return t.to_vector<double>();
}

Tensor matrix(std::initializer_list<double> v, int64_t rows, int64_t cols, DType dt = kFloat64) {
  return tensor(v, dt).reshape({rows, cols});
}

Tensor randn_like_shape(IntList shape, uint64_t seed, DType dt = kFloat64) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    auto r = Generator::philox(seed, i);
    v[i] = Generator::to_unit_double(r[0], r[1]) * 2 - 1;
  }
  return Tensor::from_vector(v, shape).to(dt);
}

// ---------------------------------------------------------------- cross_entropy values

// 4 samples, 3 classes; targets 2 are ignored. Values from a small independent
// computation (log-softmax by hand). Check by hand for sample 2 (equal logits): log p = -ln 3
// for every class, so its loss is ln 3 = 1.0986122886681098 whatever the smoothing.
struct CrossEntropyData {
  Tensor logits = matrix({1.0, 2.0, 0.5, 0.1, -1.0, 2.0, 0.3, 0.3, 0.3, 2.0, 1.0, -1.0}, 4, 3);
  Tensor target = tensor({1, 2, 0, 2});
  Tensor weight = tensor({1.0, 2.0, 0.5}, kFloat64);
};

TEST(NnCrossEntropy, IgnoreIndexAndLabelSmoothingMatchHandValues) {
  CrossEntropyData d;
  F::CrossEntropyOptions o{.ignore_index = 2, .label_smoothing = 0.1};
  EXPECT_NEAR(F::cross_entropy(d.logits, d.target, o).item<double>(), 0.8231572030546941, 1e-12);
  o.reduction = "sum";
  EXPECT_NEAR(F::cross_entropy(d.logits, d.target, o).item<double>(), 1.6463144061093882, 1e-12);
  o.reduction = "none";
  std::vector<double> none = values(F::cross_entropy(d.logits, d.target, o));
  std::vector<double> want = {0.5477021174412783, 0.0, 1.0986122886681098, 0.0};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(none[i], want[i], 1e-12) << i;
}

TEST(NnCrossEntropy, WeightedMeanDividesByCountedTargetWeights) {
  CrossEntropyData d;
  F::CrossEntropyOptions o{.weight = d.weight, .ignore_index = 2, .label_smoothing = 0.1};
  EXPECT_NEAR(F::cross_entropy(d.logits, d.target, o).item<double>(), 0.6884319987842688, 1e-12);
  o.reduction = "sum";
  EXPECT_NEAR(F::cross_entropy(d.logits, d.target, o).item<double>(), 2.0652959963528064, 1e-12);
  o.reduction = "none";
  std::vector<double> none = values(F::cross_entropy(d.logits, d.target, o));
  EXPECT_NEAR(none[0], 0.9483735028735611, 1e-12);
  EXPECT_NEAR(none[2], 1.116922493479245, 1e-12);
}

TEST(NnCrossEntropy, WithoutSmoothingIsLogSoftmaxThenNll) {
  CrossEntropyData d;
  EXPECT_NEAR(F::cross_entropy(d.logits, d.target, {.ignore_index = 2}).item<double>(),
              0.7814905363880273, 1e-12);
  Tensor nll = F::nll_loss(F::log_softmax(d.logits, 1), d.target, {.ignore_index = 2});
  EXPECT_NEAR(nll.item<double>(), 0.7814905363880273, 1e-12);
}

TEST(NnCrossEntropy, GradientOfIgnoredSamplesIsZero) {
  CrossEntropyData d;
  Tensor logits = d.logits.clone().requires_grad_();
  F::cross_entropy(logits, d.target, {.ignore_index = 2, .label_smoothing = 0.2}).backward();
  std::vector<double> g = values(logits.grad());
  for (int64_t i : {3, 4, 5, 9, 10, 11}) EXPECT_EQ(g[i], 0.0) << i;
  // A counted sample's gradient sums to zero over the classes (softmax minus a distribution).
  EXPECT_NEAR(g[0] + g[1] + g[2], 0.0, 1e-12);
  EXPECT_NE(g[0], 0.0);
}

TEST(NnCrossEntropy, ProbabilityTargetsMatchIndexTargetsForOneHot) {
  CrossEntropyData d;
  Tensor target = tensor({1, 0, 0, 2});
  Tensor probs = F::one_hot(target, 3).to(kFloat64);
  for (double eps : {0.0, 0.3}) {
    double a = F::cross_entropy(d.logits, target, {.label_smoothing = eps}).item<double>();
    double b = F::cross_entropy(d.logits, probs, {.label_smoothing = eps}).item<double>();
    EXPECT_NEAR(a, b, 1e-12) << eps;
  }
}

// ---------------------------------------------------------------- batch_norm running stats

TEST(NnBatchNorm, TrainingUpdatesRunningStatsWithUnbiasedVariance) {
  // Channel 0: 1, 3, 5, 7 (mean 4, biased var 5, unbiased 20/3); channel 1: 2, 4, 6, 8 (mean 5).
  Tensor x = matrix({1, 2, 3, 4, 5, 6, 7, 8}, 4, 2);
  Tensor rm = tensor({0.0, 1.0}, kFloat64), rv = tensor({1.0, 2.0}, kFloat64);
  uint64_t version = rm.version();
  Tensor y = F::batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_GT(rm.version(), version);  // written in place
  std::vector<double> m = values(rm), v = values(rv);
  EXPECT_NEAR(m[0], 0.9 * 0.0 + 0.1 * 4, 1e-12);
  EXPECT_NEAR(m[1], 0.9 * 1.0 + 0.1 * 5, 1e-12);
  EXPECT_NEAR(v[0], 0.9 * 1.0 + 0.1 * 20.0 / 3, 1e-12);
  EXPECT_NEAR(v[1], 0.9 * 2.0 + 0.1 * 20.0 / 3, 1e-12);
  // The output used the batch statistics (biased variance).
  EXPECT_NEAR(values(y)[0], (1 - 4) / std::sqrt(5 + 1e-5), 1e-12);
  EXPECT_NEAR(values(y)[7], (8 - 5) / std::sqrt(5 + 1e-5), 1e-12);
  // Eval mode then normalizes with the updated running statistics and leaves them alone.
  Tensor e = F::batch_norm(x, rm, rv, Tensor(), Tensor(), false, 0.1, 1e-5);
  EXPECT_NEAR(values(e)[0], (1 - 0.4) / std::sqrt(v[0] + 1e-5), 1e-12);
  EXPECT_EQ(values(rm), m);
}

TEST(NnBatchNorm, ImageInputUpdatesPerChannelAndRecordsNoGradientForBuffers) {
  // [N=2, C=1, H=2, W=1]: values 1..4, mean 2.5, biased var 1.25, unbiased 5/3.
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64).reshape({2, 1, 2, 1}).requires_grad_();
  Tensor rm = zeros({1}, kFloat64), rv = ones({1}, kFloat64);
  Tensor w = tensor({2.0}, kFloat64).requires_grad_(), b = tensor({0.5}, kFloat64).requires_grad_();
  Tensor y = F::batch_norm(x, rm, rv, w, b, true, 0.5, 0.0);
  EXPECT_NEAR(values(rm)[0], 0.5 * 2.5, 1e-12);
  EXPECT_NEAR(values(rv)[0], 0.5 + 0.5 * 5.0 / 3, 1e-12);
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rm.grad_fn());
  // Backward still works after the in-place update (the buffers were not saved).
  (y * y).sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_NEAR(values(b.grad())[0], 2 * values(y.sum())[0], 1e-9);
}

TEST(NnBatchNorm, WithoutRunningStatsTrainingStillNormalizes) {
  Tensor x = matrix({1, 2, 3, 4, 5, 6}, 3, 2);
  std::vector<double> y = values(F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true));
  EXPECT_NEAR(y[0] + y[2] + y[4], 0.0, 1e-12);
}

// ---------------------------------------------------------------- dropout

TEST(NnDropout, SameSeedGivesSameMaskAndCallsAdvanceTheStream) {
  Tensor x = ones({1000}, kFloat32);
  manual_seed(42);
  std::vector<double> a = values(F::dropout(x, 0.5));
  std::vector<double> b = values(F::dropout(x, 0.5));
  manual_seed(42);
  std::vector<double> c = values(F::dropout(x, 0.5));
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
  Generator g1(7), g2(7);
  EXPECT_EQ(values(F::dropout(x, 0.2, true, &g1)), values(F::dropout(x, 0.2, true, &g2)));
}

TEST(NnDropout, MaskDoesNotDependOnThreadCount) {
  Tensor x = ones({300000}, kFloat32);
  const int threads = num_threads();
  Generator g1(99), g2(99);
  set_num_threads(1);
  std::vector<double> one = values(F::dropout(x, 0.4, true, &g1));
  set_num_threads(std::max(2, threads));
  std::vector<double> many = values(F::dropout(x, 0.4, true, &g2));
  set_num_threads(threads);
  EXPECT_EQ(one, many);
}

TEST(NnDropout, DropsAboutPAndScalesTheRest) {
  Tensor x = ones({200000}, kFloat32);
  Generator g(3);
  for (double p : {0.1, 0.5, 0.9}) {
    std::vector<double> y = values(F::dropout(x, p, true, &g));
    double zeros = 0, sum = 0;
    for (double v : y) {
      zeros += v == 0;
      sum += v;
      if (v != 0) {
        ASSERT_NEAR(v, 1 / (1 - p), 1e-6);
      }
    }
    EXPECT_NEAR(zeros / y.size(), p, 0.01) << p;
    EXPECT_NEAR(sum / y.size(), 1.0, 0.03) << p;  // the scaling keeps the expectation
  }
}

TEST(NnDropout, BackwardReusesTheForwardMask) {
  Tensor x = randn_like_shape({50, 40}, 1).requires_grad_();
  Generator g(11);
  Tensor y = F::dropout(x, 0.3, true, &g);
  Tensor upstream = randn_like_shape({50, 40}, 2);
  (y * upstream).sum().backward();
  std::vector<double> gx = values(x.grad()), yv = values(y), up = values(upstream);
  for (size_t i = 0; i < gx.size(); ++i)
    EXPECT_DOUBLE_EQ(gx[i], yv[i] != 0 ? up[i] / 0.7 : 0.0) << i;
}

TEST(NnDropout, EvalAndZeroPReturnTheInputAndPOneGivesZeros) {
  Tensor x = randn_like_shape({4, 5}, 3);
  EXPECT_TRUE(F::dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(F::dropout(x, 0.0, true).is_same(x));
  Tensor xg = x.clone().requires_grad_();
  Tensor y = F::dropout(xg, 1.0);
  for (double v : values(y)) EXPECT_EQ(v, 0.0);
  y.sum().backward();
  for (double v : values(xg.grad())) EXPECT_EQ(v, 0.0);
}

TEST(NnDropout, ProbabilityOutsideUnitIntervalIsAnError) {
  Tensor x = ones({3});
  for (double p : {-0.1, 1.5}) {
    expect_error([&] { F::dropout(x, p); },
                 {"[dropout]", "expected a probability p in [0, 1]", "Fix:"});
    expect_error([&] { F::dropout(x, p, false); },
                 {"[dropout]"});  // checked in eval mode too, as in PyTorch
  }
}

// ---------------------------------------------------------------- embedding

TEST(NnEmbedding, OutOfRangeIndexNamesTheIndexAndTheTableSize) {
  Tensor w = zeros({10, 4});
  expect_error(
      [&] {
        F::embedding(tensor({1, 12, 3}), w);
      },
      {"[embedding]", "index 12", "element 1", "10 rows", "float32[10, 4]", "Fix:"});
  expect_error([&] { F::embedding(tensor({-1}), w); }, {"index -1", "10 rows"});
  expect_error(
      [&] {
        F::embedding(tensor({1.0, 2.0}), w);
      },
      {"[embedding]", "integer indices", "Fix:"});
  expect_error([&] { F::embedding(tensor({1}), zeros({10})); }, {"[embedding]", "2-D weight"});
  expect_error([&] { F::embedding(tensor({1}), w, 10); }, {"padding_idx=10", "10 rows"});
}

TEST(NnEmbedding, PaddingRowReceivesNoGradientAndRepeatsAccumulate) {
  Tensor w = randn_like_shape({5, 3}, 4).requires_grad_();
  Tensor idx = tensor({0, 4, 0, 2, 4}).reshape({5});
  F::embedding(idx, w, -1).sum().backward();  // padding_idx -1 = row 4
  std::vector<double> g = values(w.grad());
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(g[0 * 3 + j], 2.0);  // read twice
    EXPECT_EQ(g[1 * 3 + j], 0.0);
    EXPECT_EQ(g[2 * 3 + j], 1.0);
    EXPECT_EQ(g[4 * 3 + j], 0.0);  // the padding row, although it was read
  }
}

// ---------------------------------------------------------------- one_hot

TEST(NnOneHot, ValuesAndErrors) {
  Tensor y = F::one_hot(tensor({2, 0}));
  EXPECT_EQ(y.dtype(), kInt64);
  EXPECT_EQ(Shape(y.sizes()), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0}));
  expect_error(
      [&] {
        F::one_hot(tensor({0, 3}), 3);
      },
      {"[one_hot]", "index 3", "num_classes", "Fix:"});
  expect_error([&] { F::one_hot(tensor({-1, 0}), 3); }, {"[one_hot]", "index -1"});
  expect_error([&] { F::one_hot(tensor({1.0})); }, {"[one_hot]", "int64", "Fix:"});
  expect_error([&] { F::one_hot(zeros({0}, kInt64)); }, {"[one_hot]", "empty", "Fix:"});
}

// ---------------------------------------------------------------- error messages

TEST(NnErrors, Softmax) {
  expect_error([] { F::softmax(zeros({2, 3}), 2); }, {"[softmax]", "dim 2", "rank 2"});
  expect_error([] { F::log_softmax(zeros({2}, kInt64), 0); },
               {"[log_softmax]", "float32 or float64", "Fix:"});
}

TEST(NnErrors, NllLossAndCrossEntropy) {
  Tensor x = zeros({4, 3});
  expect_error(
      [&] {
        F::nll_loss(x, tensor({0, 1, 2}));
      },
      {"[nll_loss]", "target of shape [4]", "int64[3]", "Fix:"});
  expect_error([&] { F::nll_loss(x, zeros({4})); }, {"[nll_loss]", "integer indices", "Fix:"});
  expect_error(
      [&] {
        F::nll_loss(x, tensor({0, 1, 2, 3}));
      },
      {"[nll_loss]", "index 3", "element 3", "3 entries", "Fix:"});
  expect_error(
      [&] {
        F::nll_loss(x, tensor({0, 1, 2, 0}), {.weight = ones({4})});
      },
      {"[nll_loss]", "shape [3]", "float32[4]"});
  expect_error(
      [&] {
        F::nll_loss(x, tensor({0, 1, 2, 0}), {.weight = ones({3}, kFloat64)});
      },
      {"[nll_loss]", "dtype float32", "Fix:"});
  expect_error(
      [&] {
        F::nll_loss(x, tensor({0, 1, 2, 0}), {.reduction = "avg"});
      },
      {"[nll_loss]", "reduction", "\"avg\""});
  expect_error([&] { F::nll_loss(zeros({}), zeros({}, kInt64)); }, {"[nll_loss]", "0-d", "Fix:"});
  expect_error(
      [&] {
        F::cross_entropy(x, tensor({0, 1, 2, 0}), {.label_smoothing = 1.5});
      },
      {"[cross_entropy]", "label_smoothing in [0, 1]"});
  expect_error(
      [&] {
        F::cross_entropy(x, tensor({0, 1, 2, 0}), {.reduction = "mena"});
      },
      {"[cross_entropy]", "\"mena\""});
  expect_error(
      [&] {
        F::cross_entropy(x, zeros({4, 2}));
      },
      {"[cross_entropy]", "class probabilities", "Fix:"});
}

TEST(NnErrors, ElementwiseLosses) {
  expect_error([] { F::binary_cross_entropy(full({3}, 1.5), zeros({3})); },
               {"[binary_cross_entropy]", "[0, 1]", "1.5", "Fix:"});
  expect_error(
      [] {
        F::binary_cross_entropy(full({3}, 0.5), zeros({2, 3}));
      },
      {"[binary_cross_entropy]", "target of the input's shape [3]", "Fix:"});
  expect_error(
      [] {
        F::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), {}, "mean", ones({2}));
      },
      {"[binary_cross_entropy_with_logits]"});
  expect_error(
      [] {
        F::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), {}, "mean",
                                            ones({2, 2, 3}));
      },
      {"[binary_cross_entropy_with_logits]", "pos_weight", "Fix:"});
  expect_error([] { F::mse_loss(zeros({3}), zeros({3}), "max"); }, {"[mse_loss]", "\"max\""});
  expect_error([] { F::l1_loss(zeros({3}), zeros({3}), ""); }, {"[l1_loss]", "reduction"});
}

TEST(NnErrors, LayerNorm) {
  expect_error(
      [] {
        F::layer_norm(zeros({3, 4}), {5});
      },
      {"[layer_norm]", "normalized_shape=[5]", "[*, 5]", "float32[3, 4]", "Fix:"});
  expect_error(
      [] {
        F::layer_norm(zeros({3, 4}), {4}, ones({3}));
      },
      {"[layer_norm]", "weight of shape [4]"});
  expect_error(
      [] {
        F::layer_norm(zeros({3, 4}), {4}, Tensor(), ones({4}, kFloat64));
      },
      {"[layer_norm]", "bias of dtype float32", "Fix:"});
}

TEST(NnErrors, BatchNorm) {
  Tensor x = zeros({4, 3});
  expect_error([&] { F::batch_norm(x, Tensor(), Tensor()); },
               {"[batch_norm]", "evaluation mode", "running_mean", "Fix:"});
  expect_error(
      [&] {
        F::batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"[batch_norm]", "more than 1 value per channel", "Fix:"});
  expect_error([&] { F::batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), true); },
               {"[batch_norm]", "running_mean without running_var", "Fix:"});
  expect_error([&] { F::batch_norm(x, zeros({4}), ones({4})); },
               {"[batch_norm]", "shape [3]", "float32[4]"});
  expect_error([&] { F::batch_norm(zeros({3}), zeros({3}), ones({3})); },
               {"[batch_norm]", "[N, C]", "Fix:"});
}

TEST(NnErrors, Conv2d) {
  Tensor x = zeros({1, 3, 8, 8});
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 2, 3, 3}));
      },
      {"[conv2d]", "3 channels", "expects 2", "in_channels=3"});
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 3, 9, 9}));
      },
      {"[conv2d]", "larger than the padded input", "Fix:"});
  expect_error(
      [&] {
        F::conv2d(zeros({1, 4, 8, 8}), zeros({3, 2, 3, 3}), {}, {1}, {0}, {1}, 2);
      },
      {"[conv2d]", "out_channels=3", "groups=2"});
  expect_error([&] { F::conv2d(x, zeros({4, 3, 3})); }, {"[conv2d]", "4-D weight"});
  expect_error(
      [&] {
        F::conv2d(zeros({3, 8}), zeros({4, 3, 3, 3}));
      },
      {"[conv2d]", "[C, H, W]", "Fix:"});
  expect_error([&] { F::conv2d(x, zeros({4, 3, 3, 3}), ones({5})); }, {"[conv2d]", "shape [4]"});
  expect_error([&] { F::conv2d(x, zeros({4, 3, 3, 3}), {}, {0}); }, {"[conv2d]", "stride", ">= 1"});
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 3, 3, 3}), {}, {1, 1, 1});
      },
      {"[conv2d]", "stride", "one value or two"});
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 3, 3, 3}), {}, {2}, "same");
      },
      {"[conv2d]", "stride 1", "Fix:"});
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 3, 3, 3}), {}, {1}, "full");
      },
      {"[conv2d]", "\"full\""});
  expect_error([&] { F::conv2d(x, zeros({4, 3, 3, 3}, kFloat64)); }, {"[conv2d]", "dtype", "Fix:"});
  // Window arithmetic that leaves int64 (it once wrapped around in infer).
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 3, 3, 3}), {}, {1}, {1, 4611686018427387905});
      },
      {"[conv2d] the padded input or the dilated kernel", "2 * 4611686018427387905",
       "does not fit a 64-bit size"});
  expect_error(
      [&] {
        F::conv2d(x, zeros({4, 3, 3, 3}), {}, {1}, {0}, {4611686018427387905});
      },
      {"[conv2d]", "4611686018427387905 * 2", "does not fit"});
}

// NaN counts as the maximum and a later NaN replaces an earlier one (PyTorch's CPU rule), on
// every path: the vector 2x2 row (float32), the scalar tiled rows (float64, 3x3) and the
// general tap loop (a window that overlaps its neighbours).
TEST(NnFunctional, MaxPoolNaNAndMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  for (DType dtype : {kFloat32, kFloat64}) {
    // One 4x6 plane: window (0,0) holds two NaNs, window (0,1) only -inf, window (1,2) a NaN
    // after its maximum.
    std::vector<float> v(24, 0.0f);
    v[0] = nan, v[7] = nan, v[1] = 5.0f;
    v[2] = v[3] = v[8] = v[9] = -inf;
    v[16] = 3.0f, v[23] = nan;
    Tensor x = Tensor::from_vector(v, {1, 1, 4, 6}).to(dtype);
    auto [out, at] = F::max_pool2d_with_indices(x, {2});
    std::vector<double> o = out.to_vector<double>();
    std::vector<int64_t> i = at.to_vector<int64_t>();
    EXPECT_TRUE(std::isnan(o[0]));
    EXPECT_EQ(i[0], 7);
    EXPECT_EQ(o[1], -INFINITY);
    EXPECT_EQ(i[1], 2);
    EXPECT_TRUE(std::isnan(o[5]));
    EXPECT_EQ(i[5], 23);
    // The same plane through the general loop (stride 1 windows overlap): same rules.
    auto [o1, at1] = F::max_pool2d_with_indices(x, {2}, {1});
    EXPECT_TRUE(std::isnan(o1.to_vector<double>()[0]));
    EXPECT_EQ(at1.to_vector<int64_t>()[0], 7);
  }
}

TEST(NnErrors, Pooling) {
  Tensor x = zeros({1, 2, 6, 6});
  expect_error([&] { F::max_pool2d(x, {2}, {}, {2}); },
               {"[max_pool2d]", "at most half of the (dilated) kernel size", "Fix:"});
  expect_error([&] { F::max_pool2d(x, {7}); }, {"[max_pool2d]", "output would be empty", "Fix:"});
  expect_error([&] { F::max_pool2d(x, {0}); }, {"[max_pool2d]", "kernel_size", ">= 1"});
  expect_error([&] { F::max_pool2d(x, {3}, {}, {0}, {4611686018427387905}); },
               {"max_pool2d", "does not fit a 64-bit size"});
  expect_error(
      [&] {
        F::avg_pool2d(zeros({6, 6}), {2});
      },
      {"[avg_pool2d]", "[N, C, H, W]", "Fix:"});
  expect_error([&] { F::avg_pool2d(x, {2}, {}, {0}, false, true, 0); },
               {"[avg_pool2d]", "divisor_override"});
  expect_error(
      [&] {
        F::adaptive_avg_pool2d(x, {0, 2});
      },
      {"[adaptive_avg_pool2d]", "output_size"});
  expect_error(
      [&] {
        F::adaptive_avg_pool2d(x, {1, 2, 3});
      },
      {"[adaptive_avg_pool2d]", "one value or two"});
}

TEST(NnErrors, Pad) {
  Tensor x = zeros({2, 3, 4});
  expect_error([&] { F::pad(x, {1}); }, {"[pad]", "even-length", "Fix:"});
  expect_error([&] { F::pad(x, {1, 1, 1, 1, 1, 1, 1, 1}); }, {"[pad]", "at most 2 * rank = 6"});
  expect_error(
      [&] {
        F::pad(x, {4, 0}, "reflect");
      },
      {"[pad]", "smaller than the padded dim", "Fix:"});
  expect_error([&] { F::pad(x, {-1, 0}, "replicate"); }, {"[pad]", "non-negative", "Fix:"});
  expect_error([&] { F::pad(x, {5, 0}, "circular"); }, {"[pad]", "wrap at most once"});
  expect_error([&] { F::pad(x, {-3, -2}); }, {"[pad]", "negative size -1", "Fix:"});
  expect_error([&] { F::pad(x, {1, 1}, "mirror"); }, {"[pad]", "\"mirror\""});
  expect_error(
      [&] {
        F::pad(x, {1, 1}, "reflect", 2.0);
      },
      {"[pad]", "only applies to mode \"constant\""});
}

TEST(NnErrors, GradientOpsCheckTheirInputs) {
  // The backward ops have no user-facing function; their checks guard direct calls (the
  // tracer, tests) and vjps.
  init();
  auto run = [](const OpDef& op, Tensors in, const Attrs& a) { return dispatch(op, in, a); };
  ops::NllLossBackwardAttrs nll;
  nll.input_shape = {4, 3};
  expect_error(
      [&] {
        run(ops::nll_loss_backward, {zeros({4}), tensor({0, 1, 2, 0}), Tensor()}, nll);
      },
      {"[nll_loss_backward]", "gradient of shape []", "float32[4]"});
  ops::Conv2dGradAttrs conv;
  conv.size = {1, 2, 5, 5};
  expect_error(
      [&] {
        run(ops::conv2d_input_grad, {zeros({1, 3, 4, 4}), zeros({3, 2, 3, 3})}, conv);
      },
      {"[conv2d_input_grad]", "output shape [1, 3, 3, 3]", "float32[1, 3, 4, 4]"});
  ops::PoolBackwardSizeAttrs pool;
  pool.input_size = {2, 2};
  expect_error(
      [&] {
        run(ops::max_pool2d_backward, {ones({1, 1, 1, 1}), full({1, 1, 1, 1}, 7, kInt64)}, pool);
      },
      {"[max_pool2d_backward]", "index 7", "4 elements", "Fix:"});
  expect_error(
      [&] {
        run(ops::max_pool2d_backward, {ones({1, 1, 1, 1}), zeros({1, 1, 1, 2}, kInt64)}, pool);
      },
      {"[max_pool2d_backward]", "int64 indices"});
  ops::AvgPool2dBackwardAttrs avg;
  avg.pool.kernel_size = {2, 2}, avg.pool.stride = {2, 2}, avg.pool.padding = {0, 0};
  avg.input_size = {4, 4};
  expect_error(
      [&] {
        run(ops::avg_pool2d_backward, {ones({1, 1, 3, 3})}, avg);
      },
      {"[avg_pool2d_backward]", "pooled shape [1, 1, 2, 2]"});
  ops::EmbeddingBackwardAttrs emb;
  emb.num_weights = 5;
  expect_error(
      [&] {
        run(ops::embedding_backward, {zeros({3, 4}), tensor({1, 2})}, emb);
      },
      {"[embedding_backward]", "[*indices.shape, D]"});
  expect_error(
      [&] {
        run(ops::embedding_backward, {zeros({2, 4}), tensor({1, 5})}, emb);
      },
      {"[embedding_backward]", "index 5", "5 entries"});
  ops::PadAttrs pad;
  pad.pad = {1, 1};
  expect_error(
      [&] {
        run(ops::pad_backward, {zeros({3, 4})}, pad);
      },
      {"[pad_backward]", "non-constant modes"});
  ops::DropoutAttrs drop;
  drop.p = 2;
  expect_error([&] { run(ops::dropout, {zeros({3})}, drop); }, {"[dropout]", "[0, 1]"});
  ops::OneHotAttrs hot;
  hot.num_classes = -1;
  expect_error([&] { run(ops::one_hot, {tensor({1})}, hot); }, {"[one_hot]", "num_classes >= 0"});
  ops::LayerNormAttrs ln;
  ln.normalized_shape = {3};
  ln.eps = -1;
  expect_error(
      [&] {
        run(ops::layer_norm, {zeros({2, 3}), Tensor(), Tensor()}, ln);
      },
      {"[layer_norm]", "eps >= 0"});
}

// ---------------------------------------------------------------- second derivatives

// For L(p) = sum(f(p) * w), compares d<dL/dp, v>/dp (double backward through kiln's vjps)
// with central finite differences of <dL/dp, v> (first backward only).
void expect_second_derivatives_match(const std::function<Tensor(const Tensor&)>& f, IntList shape,
                                     const std::string& what) {
  Tensor p0 = randn_like_shape(shape, 21);
  Tensor out = f(p0.clone());
  Tensor w = randn_like_shape(out.sizes(), 22), v = randn_like_shape(shape, 23);
  auto first = [&](const Tensor& p, bool create_graph) {
    Tensor loss = (f(p) * w).sum();
    return grad({loss}, {p}, {}, GradOptions{.create_graph = create_graph})[0];
  };
  Tensor p = p0.clone().requires_grad_();
  Tensor gv = (first(p, true) * v).sum();
  ASSERT_TRUE(gv.requires_grad()) << what << ": the first gradient was not recorded";
  std::vector<double> analytic = values(grad({gv}, {p}, {}, GradOptions{.allow_unused = true})[0]);
  const double h = 1e-6;
  for (int64_t e = 0; e < p0.numel(); ++e) {
    double s[2];
    for (int k = 0; k < 2; ++k) {
      Tensor q = p0.clone();
      q.data_ptr<double>()[e] += k == 0 ? h : -h;
      q.requires_grad_();
      s[k] = (first(q, false) * v).sum().item<double>();
    }
    double numeric = (s[0] - s[1]) / (2 * h);
    EXPECT_NEAR(analytic[e], numeric, 1e-5 + 1e-5 * std::fabs(numeric)) << what << " element " << e;
  }
}

TEST(NnDoubleBackward, SoftmaxAndLosses) {
  expect_second_derivatives_match([](const Tensor& x) { return F::softmax(x, 1); }, {3, 4},
                                  "softmax");
  expect_second_derivatives_match([](const Tensor& x) { return F::log_softmax(x, 0); }, {3, 4},
                                  "log_softmax");
  Tensor target = tensor({2, 0, 1});
  expect_second_derivatives_match(
      [&](const Tensor& x) {
        return F::cross_entropy(x, target, {.ignore_index = 0, .label_smoothing = 0.1});
      },
      {3, 4}, "cross_entropy");
  Tensor t = randn_like_shape({3, 4}, 5) * 0.5 + 0.5;
  expect_second_derivatives_match(
      [&](const Tensor& x) {
        return F::binary_cross_entropy_with_logits(x, t, {}, "sum", full({4}, 2.0, kFloat64));
      },
      {3, 4}, "binary_cross_entropy_with_logits");
  expect_second_derivatives_match(
      [&](const Tensor& x) { return F::binary_cross_entropy(sigmoid(x), t, {}, "sum"); }, {3, 4},
      "binary_cross_entropy");
}

TEST(NnDoubleBackward, Norms) {
  // The statistics outputs carry gradients in double backward; these checks fail without
  // the vjps' handling of gradients at mean/rstd.
  Tensor w = randn_like_shape({5}, 6), b = randn_like_shape({5}, 7);
  expect_second_derivatives_match([&](const Tensor& x) { return F::layer_norm(x, {5}, w, b); },
                                  {3, 5}, "layer_norm");
  Tensor cw = randn_like_shape({3}, 8);
  expect_second_derivatives_match(
      [&](const Tensor& x) { return F::batch_norm(x, Tensor(), Tensor(), cw, Tensor(), true); },
      {4, 3, 2}, "batch_norm");
  Tensor rm = randn_like_shape({3}, 9), rv = full({3}, 1.5, kFloat64);
  expect_second_derivatives_match(
      [&](const Tensor& x) { return F::batch_norm(x * x, rm, rv, cw, Tensor(), false); }, {4, 3, 2},
      "batch_norm eval");
}

TEST(NnDoubleBackward, ConvolutionPoolingAndLookups) {
  // conv2d of parameters used both as input and weight: second derivatives need the vjps
  // of conv2d_input_grad and conv2d_weight_grad.
  expect_second_derivatives_match(
      [](const Tensor& p) {
        Tensor x = p.slice(0, 0, 32).reshape({1, 2, 4, 4});
        Tensor w = p.slice(0, 32, 50).reshape({1, 2, 3, 3});
        return F::conv2d(x, w, Tensor(), {1}, {1}, {1}, 1);
      },
      {50}, "conv2d");
  expect_second_derivatives_match(
      [](const Tensor& p) {
        Tensor x = p.slice(0, 0, 36).reshape({1, 4, 3, 3});
        Tensor w = p.slice(0, 36, 72).reshape({2, 2, 3, 3});
        return F::conv2d(x * x, w, Tensor(), {2}, {1}, {1}, 2);
      },
      {72}, "conv2d strided grouped");
  expect_second_derivatives_match(
      [](const Tensor& x) { return F::max_pool2d(x * x, {2}, {1}, {1}); }, {1, 2, 4, 3},
      "max_pool2d");
  expect_second_derivatives_match(
      [](const Tensor& x) { return F::avg_pool2d(x * x, {3}, {2}, {1}, true, false); },
      {1, 2, 5, 4}, "avg_pool2d");
  expect_second_derivatives_match(
      [](const Tensor& x) {
        return F::adaptive_avg_pool2d(x * x, {2, 3});
      },
      {1, 2, 5, 4}, "adaptive_avg_pool2d");
  expect_second_derivatives_match(
      [](const Tensor& x) {
        return F::pad(x * x, {1, 2, 2, 1}, "reflect");
      },
      {2, 3, 4}, "pad reflect");
  expect_second_derivatives_match(
      [](const Tensor& x) {
        return F::pad(x * x, {1, -1, 2, 0}, "constant", 3);
      },
      {2, 3, 4}, "pad constant");
  Tensor idx = tensor({1, 3, 1, 0});
  expect_second_derivatives_match([&](const Tensor& w) { return F::embedding(idx, w * w, 3); },
                                  {4, 2}, "embedding");
  expect_second_derivatives_match(
      [](const Tensor& x) {
        Generator g(5);
        return F::dropout(x * x, 0.4, true, &g);
      },
      {4, 5}, "dropout");
}

// ---------------------------------------------------------------- misc behaviour

TEST(NnFunctional, UnbatchedInputsKeepTheirRank) {
  Tensor x = randn_like_shape({3, 6, 6}, 30, kFloat32);
  EXPECT_EQ(Shape(F::conv2d(x, zeros({2, 3, 3, 3})).sizes()), (Shape{2, 4, 4}));
  EXPECT_EQ(Shape(F::max_pool2d(x, {2}).sizes()), (Shape{3, 3, 3}));
  EXPECT_EQ(Shape(F::avg_pool2d(x, {3}, {1}).sizes()), (Shape{3, 4, 4}));
  EXPECT_EQ(Shape(F::adaptive_avg_pool2d(x, {1}).sizes()), (Shape{3, 1, 1}));
}

TEST(NnFunctional, ConvSamePaddingKeepsTheSpatialSize) {
  Tensor x = randn_like_shape({2, 3, 7, 6}, 31, kFloat32);
  for (int64_t k : {1, 2, 3, 4}) {
    Tensor y = F::conv2d(x, zeros({5, 3, k, k}), Tensor(), {1}, "same", {2});
    EXPECT_EQ(Shape(y.sizes()), (Shape{2, 5, 7, 6})) << k;
  }
  EXPECT_EQ(Shape(F::conv2d(x, zeros({5, 3, 3, 3}), Tensor(), {1}, "valid").sizes()),
            (Shape{2, 5, 5, 4}));
}

TEST(NnFunctional, MaxPoolPropagatesNan) {
  Tensor x = tensor({1.0, NAN, 3.0, 2.0}, kFloat32).reshape({1, 1, 2, 2});
  auto [y, idx] = F::max_pool2d_with_indices(x, {2});
  EXPECT_TRUE(std::isnan(y.item<double>()));
  EXPECT_EQ(idx.item<int64_t>(), 1);
}

TEST(NnFunctional, SoftmaxRowsSumToOneForLargeInputs) {
  Tensor x = randn_like_shape({37, 1000}, 40, kFloat32) * 50.0;
  std::vector<double> s = values(F::softmax(x, -1).sum({-1}));
  for (double v : s) EXPECT_NEAR(v, 1.0, 1e-5);
  std::vector<double> l = values(F::log_softmax(x, 0).exp().sum({0}));
  for (double v : l) EXPECT_NEAR(v, 1.0, 1e-4);
}

}  // namespace
}  // namespace kiln
