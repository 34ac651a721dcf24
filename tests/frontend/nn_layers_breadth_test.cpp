// The layers ported from torch.nn beyond the first set: channel dropout, Unflatten, the
// normalizations, padding and resampling layers. Their numerics against PyTorch are in
// parity_test.cpp; this file checks what parity files cannot: randomness, printouts, running
// statistics across calls, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = kiln::nn::functional;

void expect_values(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

TEST(NnBreadth, ChannelDropoutZeroesWholeChannels) {
  nn::Dropout2d drop(0.5);
  manual_seed(11);
  const Tensor x = kiln::ones({8, 16, 3, 3}, kFloat64);
  const std::vector<double> y = drop(x).to_vector<double>();
  int dropped = 0;
  for (int64_t channel = 0; channel < 8 * 16; ++channel) {
    const double first = y[static_cast<size_t>(channel * 9)];
    EXPECT_TRUE(first == 0.0 || first == 2.0) << first;
    for (int64_t k = 1; k < 9; ++k) EXPECT_EQ(y[static_cast<size_t>(channel * 9 + k)], first);
    dropped += first == 0.0;
  }
  EXPECT_GT(dropped, 30);
  EXPECT_LT(dropped, 98);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  EXPECT_EQ(drop.repr(), "Dropout2d(p=0.5, inplace=false)");
  // Unbatched inputs drop per channel too; the other ranks are refused.
  const std::vector<double> unbatched = F::dropout1d(kiln::ones({4, 5}, kFloat64), 0.5).to_vector<double>();
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t k = 1; k < 5; ++k) EXPECT_EQ(unbatched[static_cast<size_t>(c * 5 + k)], unbatched[static_cast<size_t>(c * 5)]);
  expect_error([] { F::dropout3d(kiln::ones({2, 3}), 0.5); }, {"[dropout3d] expected an input [N, C, D, H, W]", "got"});
  expect_error([] { nn::Dropout1d(-0.1); }, {"[Dropout1d] the dropout probability must lie in [0, 1]"});
}

TEST(NnBreadth, UnflattenSplitsOneDim) {
  nn::Unflatten unflatten(1, {2, -1});
  const Tensor y = unflatten(kiln::zeros({3, 10, 4}));
  EXPECT_EQ(Shape(y.sizes()), Shape({3, 2, 5, 4}));
  EXPECT_EQ(unflatten.repr(), "Unflatten(dim=1, unflattened_size=(2, -1))");
  expect_error([] { nn::Unflatten(1, {3, 4})(kiln::zeros({2, 10})); },
               {"[Unflatten] cannot split dim 1", "(size 10) into [3, 4]", "multiply to 10"});
  expect_error([] { nn::Unflatten(0, {-1, -1})(kiln::zeros({4})); }, {"only one size may be -1"});
}

TEST(NnBreadth, NormalizationLayersPrintAndCheckTheirInputs) {
  nn::GroupNorm gn(2, 6);
  EXPECT_EQ(gn.repr(), "GroupNorm(2, 6, eps=1e-05, affine=true)");
  EXPECT_EQ(gn.named_parameters().size(), 2u);
  expect_error([] { nn::GroupNorm(4, 6); }, {"[GroupNorm] expected num_groups (4) to divide num_channels (6)"});
  expect_error([&] { gn(kiln::zeros({2, 4, 3})); }, {"[GroupNorm] expected an input [N, 6, *]"});

  nn::InstanceNorm2d in(3, {.track_running_stats = true});
  EXPECT_EQ(in.repr(), "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=false, track_running_stats=true)");
  EXPECT_EQ(in.named_parameters().size(), 0u);
  EXPECT_EQ(in.named_buffers().size(), 3u);  // running_mean, running_var, num_batches_tracked
  expect_error([&] { in(kiln::zeros({2, 3})); }, {"[InstanceNorm2d] expected an input of 4 dims [N, C, *] or 3"});
  // [2, 3, 4] is an unbatched input of 2 channels.
  expect_error([&] { in(kiln::zeros({2, 3, 4})); }, {"[InstanceNorm2d] expected 3 channels, got float32[2, 3, 4]"});
  expect_error([&] { in(kiln::zeros({2, 5, 4, 4})); }, {"[InstanceNorm2d] expected 3 channels"});

  nn::RMSNorm rms(8);
  EXPECT_EQ(rms.repr(), "RMSNorm((8,), eps=None, elementwise_affine=true)");
  expect_error([&] { rms(kiln::zeros({2, 4})); }, {"[rms_norm] expected the input's trailing dims to be", "[8]"});
}

TEST(NnBreadth, InstanceNormRunningStatsFollowEveryTrainingCall) {
  nn::InstanceNorm1d in(2, {.momentum = 0.5, .track_running_stats = true});
  // Sample 0 channel 0: [1, 3] (mean 2, unbiased var 2); sample 1 channel 0: [5, 5] (5, 0).
  const Tensor x = Tensor::from_vector<double>({1, 3, 0, 0, 5, 5, 2, 4}, {2, 2, 2});
  in.to(kFloat64);
  in(x);
  // running_mean = 0.5 * 0 + 0.5 * mean(2, 5); running_var = 0.5 * 1 + 0.5 * mean(2, 0).
  EXPECT_NEAR(in.running_mean.to_vector<double>()[0], 1.75, 1e-12);
  EXPECT_NEAR(in.running_var.to_vector<double>()[0], 1.0, 1e-12);
  in(x);
  EXPECT_NEAR(in.running_mean.to_vector<double>()[0], 2.625, 1e-12);
  // Unbatched input: the same statistics as a batch of one.
  in.eval();
  const Tensor y = in(Tensor::from_vector<double>({2.625, 2.625, 0, 0}, {2, 2}));
  EXPECT_NEAR(y.to_vector<double>()[0], 0.0, 1e-12);
}

TEST(NnBreadth, ResamplingChecksItsArguments) {
  const Tensor x = kiln::zeros({1, 4, 3, 3});
  expect_error([&] { F::pixel_shuffle(x, 3); }, {"[pixel_shuffle] expected the channel count 4", "upscale_factor^2 = 9"});
  expect_error([&] { F::pixel_unshuffle(x, 2); }, {"[pixel_unshuffle]", "divide by downscale_factor 2"});
  expect_error([&] { F::interpolate(x, {}); }, {"[interpolate] expected exactly one of size and scale_factor"});
  expect_error([&] { F::interpolate(x, {.size = {4, 4}, .mode = "linear"}); },
               {"mode \"linear\" takes 3-D inputs", "use \"bilinear\""});
  expect_error([&] { F::interpolate(x, {.size = {4, 4}, .mode = "bicubic"}); }, {"unknown mode \"bicubic\""});
  expect_error([&] { F::interpolate(x, {.size = {4, 4}, .align_corners = true}); },
               {"align_corners applies to the linear modes only"});
  expect_error([&] { F::interpolate(x, {.size = {4, 4, 4}}); }, {"expected 2 values"});
  nn::Upsample up({.scale_factor = {2}, .mode = "bilinear", .align_corners = false});
  EXPECT_EQ(up.repr(), "Upsample(scale_factor=2, mode='bilinear', align_corners=false)");
  EXPECT_EQ(Shape(up(x).sizes()), Shape({1, 4, 6, 6}));
  EXPECT_EQ(nn::PixelShuffle(2).repr(), "PixelShuffle(upscale_factor=2)");
}

TEST(NnBreadth, PaddingLayersSpreadOneAmountAndPrint) {
  nn::ZeroPad2d pad(1);
  EXPECT_EQ(Shape(pad(kiln::ones({2, 3, 4})).sizes()), Shape({2, 5, 6}));
  EXPECT_EQ(pad.repr(), "ZeroPad2d((1, 1, 1, 1))");
  EXPECT_EQ(nn::ConstantPad1d(2, 3.5).repr(), "ConstantPad1d((2, 2), value=3.5)");
  nn::CircularPad1d circular(std::vector<int64_t>{1, 0});
  expect_values(circular(Tensor::from_vector<double>({1, 2, 3}, {1, 1, 3})), std::vector<double>{3, 1, 2, 3});
  expect_error([] { nn::ReflectionPad2d(std::vector<int64_t>{1, 2, 3}); }, {"expected one amount or 4"});
  expect_error([] { nn::ReplicationPad3d(1)(kiln::zeros({2, 3})); }, {"[ReplicationPad3d] expected an input of 4 or 5"});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(NnBreadth, ConvTransposeTakesPyTorchsOutputSize) {
  manual_seed(7);
  auto up = std::make_shared<nn::ConvTranspose2d>(3, 2, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 1});
  auto padded = std::make_shared<nn::ConvTranspose2d>(
      3, 2, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 1, .output_padding = 1});
  padded->load_state_dict(up->state_dict());
  const Tensor x = randn({1, 3, 5, 5});
  // Sizes 9 (output_padding 0) and 10 (output_padding 1) are the two this stride allows.
  EXPECT_EQ(Shape(up->forward(x).sizes()), Shape({1, 2, 9, 9}));
  const Tensor ten = nn::call(*up, x, std::vector<int64_t>{10, 10});
  EXPECT_EQ(ten.to_vector<float>(), padded->forward(x).to_vector<float>());
  EXPECT_EQ(Shape(up->forward(x, {1, 2, 9, 10}).sizes()), Shape({1, 2, 9, 10}));
  expect_error([&] { up->forward(x, {11, 10}); },
               {"[ConvTranspose2d] requested an output size of [11, 10], but spatial dim 0 can only be 9 to 10"});
  expect_error([&] { up->forward(x, {9}); }, {"[ConvTranspose2d] expected an output_size of 2 (or 4) entries"});
  auto line = std::make_shared<nn::ConvTranspose1d>(2, 2, 4, nn::ConvTransposeOptions{.stride = 3});
  EXPECT_EQ(line->forward(randn({2, 2, 6}), {21}).size(2), 21);  // 19 to 21 for stride 3
}

}  // namespace
}  // namespace kiln
