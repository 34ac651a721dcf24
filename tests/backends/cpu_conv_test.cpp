// kiln's direct convolution (kiln/cpu/gemm/conv2d.h) against a naive double-precision
// convolution: every micro-kernel family this CPU can run, every panel width, strides,
// asymmetric padding, dilation, groups (depthwise included), channel counts that leave
// partial panels, pixel counts that leave partial strips and blocks, bias or none, one and
// two threads; and the eager conv2d op that uses it.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kiln/cpu/gemm/conv2d.h"
#include "kiln/cpu/gemm/gemm.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::cpu::gemm {
namespace {

int64_t output_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

Conv2dShape make_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t groups,
                       int64_t kh, int64_t kw, int64_t s, int64_t ph, int64_t pw, int64_t d) {
  return {.batch = n,
          .channels = c,
          .height = h,
          .width = w,
          .out_channels = oc,
          .groups = groups,
          .kernel_h = kh,
          .kernel_w = kw,
          .stride_h = s,
          .stride_w = s,
          .pad_h = ph,
          .pad_w = pw,
          .dilation_h = d,
          .dilation_w = d,
          .out_h = output_size(h, kh, s, ph, d),
          .out_w = output_size(w, kw, s, pw, d)};
}

std::vector<double> naive(const Conv2dShape& s, const std::vector<float>& x,
                          const std::vector<float>& w, const float* bias) {
  const int64_t Cg = s.channels / s.groups, OCg = s.out_channels / s.groups;
  std::vector<double> out(static_cast<size_t>(s.batch * s.out_channels * s.out_h * s.out_w));
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oc = 0; oc < s.out_channels; ++oc)
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          const int64_t g = oc / OCg;
          double acc = bias ? bias[oc] : 0.0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < s.kernel_h; ++ki)
              for (int64_t kj = 0; kj < s.kernel_w; ++kj) {
                const int64_t ih = oh * s.stride_h - s.pad_h + ki * s.dilation_h;
                const int64_t iw = ow * s.stride_w - s.pad_w + kj * s.dilation_w;
                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
                acc += double(x[((n * s.channels + g * Cg + c) * s.height + ih) * s.width + iw]) *
                       double(w[((oc * Cg + c) * s.kernel_h + ki) * s.kernel_w + kj]);
              }
          out[((n * s.out_channels + oc) * s.out_h + oh) * s.out_w + ow] = acc;
        }
  return out;
}

void check(const Conv2dShape& s, std::string_view isa, bool with_bias, int threads) {
  SCOPED_TRACE(::testing::Message()
               << isa << " n=" << s.batch << " c=" << s.channels << " " << s.height << "x"
               << s.width << " oc=" << s.out_channels << " groups=" << s.groups
               << " k=" << s.kernel_h << "x" << s.kernel_w << " stride=" << s.stride_h
               << " pad=" << s.pad_h << "," << s.pad_w << " dilation=" << s.dilation_h
               << (with_bias ? " bias" : "") << " threads=" << threads);
  ScopedThreads scope(threads);
  const std::vector<float> x = kiln::random_floats(s.batch * s.channels * s.height * s.width, 1);
  const std::vector<float> w = kiln::random_floats(s.out_channels * s.depth(), 2);
  const std::vector<float> bias = kiln::random_floats(s.out_channels, 3);
  const float* b = with_bias ? bias.data() : nullptr;
  const int64_t size = s.batch * s.out_channels * s.out_h * s.out_w;
  std::vector<float> out(static_cast<size_t>(size + 16), -7.0f);  // 16 guard values after
  PackedConvWeights packed(w.data(), s.out_channels, s.groups, s.channels / s.groups, s.kernel_h,
                           s.kernel_w, isa);
  conv2d(s, x.data(), packed, b, out.data());
  const std::vector<double> ref = naive(s, x, w, b);
  const double tol = 1e-5 * (1.0 + std::sqrt(double(s.depth())));
  for (int64_t i = 0; i < size; ++i) ASSERT_NEAR(out[i], ref[i], tol) << "element " << i;
  for (int64_t i = size; i < size + 16; ++i) ASSERT_EQ(out[i], -7.0f) << "written past the end";
}

std::vector<std::string> families() {
  std::vector<std::string> out;
  for (const MicroKernel* k : available_kernels())
    if (has_direct_conv(kernel_name(*k))) out.push_back(kernel_name(*k));
  return out;
}

TEST(CpuConv, EveryKernelMatchesNaiveConvolution) {
  const std::vector<Conv2dShape> shapes = {
      // n, c, h, w, oc, groups, kh, kw, stride, pad_h, pad_w, dilation
      make_shape(1, 1, 5, 5, 1, 1, 3, 3, 1, 1, 1, 1),      // one channel in and out
      make_shape(2, 1, 28, 28, 32, 1, 3, 3, 1, 1, 1, 1),   // BatchNormCNN's first layer
      make_shape(1, 32, 14, 14, 64, 1, 3, 3, 1, 1, 1, 1),  // and its second
      make_shape(3, 5, 9, 11, 10, 1, 3, 3, 1, 0, 0, 1),    // no padding, partial panel
      make_shape(1, 4, 13, 7, 40, 1, 3, 5, 2, 2, 1, 1),    // stride 2, asymmetric pad, 3x5
      make_shape(2, 3, 12, 12, 70, 1, 3, 3, 1, 2, 2, 2),   // dilation 2, 70 = 64 + 6
      make_shape(1, 6, 10, 10, 12, 3, 3, 3, 1, 1, 1, 1),   // 3 groups
      make_shape(2, 8, 9, 9, 8, 8, 3, 3, 1, 1, 1, 1),      // depthwise
      make_shape(1, 3, 7, 7, 17, 1, 7, 7, 3, 3, 3, 1),     // a 7x7 stem with stride 3
      make_shape(1, 16, 40, 40, 33, 1, 1, 3, 1, 0, 1, 1),  // 1x3, 1600 pixels (4 blocks)
      make_shape(1, 2, 6, 6, 5, 1, 2, 2, 2, 0, 0, 1),      // 2x2 stride 2, 9 pixels
      make_shape(1, 64, 6, 6, 20, 1, 3, 3, 1, 1, 1, 1),    // depth 576: blocks of the depth
  };
  const std::vector<std::string> isas = families();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2: no direct kernels";
  for (const std::string& isa : isas)
    for (const Conv2dShape& s : shapes)
      for (int threads : {1, 2}) check(s, isa, /*with_bias=*/threads == 2, threads);
}

// Every panel width a family has: the same problem with 16, 24, 40 and 72 output channels
// picks each of them (and leaves partial panels).
TEST(CpuConv, EveryPanelWidth) {
  const std::vector<std::string> isas = families();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2: no direct kernels";
  for (const std::string& isa : isas)
    for (int64_t oc : {3, 8, 16, 24, 40, 64, 72})
      check(make_shape(2, 7, 8, 9, oc, 1, 3, 3, 1, 1, 1, 1), isa, true, 1);
}

// The epilogue sees every image exactly once, after it is final: it adds 1 to each element
// of the images it is given, so an image missed, given twice or given early shows up.
TEST(CpuConv, EpilogueSeesEachImageOnceWhenFinal) {
  const std::vector<std::string> isas = families();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2: no direct kernels";
  for (const std::string& isa : isas)
    for (int threads : {1, 2})
      for (int64_t batch : {1, 2, 7, 33}) {
        SCOPED_TRACE(::testing::Message() << isa << " batch=" << batch << " threads=" << threads);
        ScopedThreads scope(threads);
        const Conv2dShape s = make_shape(batch, 3, 12, 10, 20, 1, 3, 3, 1, 1, 1, 1);
        const std::vector<float> x = kiln::random_floats(batch * 3 * 12 * 10, 4);
        const std::vector<float> w = kiln::random_floats(20 * s.depth(), 5);
        const int64_t per_image = s.out_channels * s.out_h * s.out_w;
        std::vector<float> out(static_cast<size_t>(batch * per_image));
        std::vector<std::atomic<int>> seen(static_cast<size_t>(batch));
        PackedConvWeights packed(w.data(), 20, 1, 3, 3, 3, isa);
        conv2d(s, x.data(), packed, nullptr, out.data(), [&](int64_t n0, int64_t n1) {
          for (int64_t n = n0; n < n1; ++n) {
            seen[n].fetch_add(1);
            for (int64_t i = 0; i < per_image; ++i) out[n * per_image + i] += 1.0f;
          }
        });
        const std::vector<double> ref = naive(s, x, w, nullptr);
        for (int64_t n = 0; n < batch; ++n) ASSERT_EQ(seen[n].load(), 1) << "image " << n;
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i] + 1.0, 1e-4) << i;
      }
}

// A bias, a per-channel scale and shift and a ReLU in the store (an eval batch_norm and its
// activation), on both orientations (shallow and tiled) and with groups.
TEST(CpuConv, OutputTransformMatchesItsDefinition) {
  const std::vector<std::string> isas = families();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2: no direct kernels";
  for (const std::string& isa : isas)
    for (const Conv2dShape& s : {make_shape(2, 1, 9, 21, 11, 1, 3, 3, 1, 1, 1, 1),
                                 make_shape(2, 12, 7, 9, 20, 2, 3, 3, 1, 1, 1, 1)}) {
      SCOPED_TRACE(::testing::Message() << isa << " depth=" << s.depth());
      const std::vector<float> x =
          kiln::random_floats(s.batch * s.channels * s.height * s.width, 7);
      const std::vector<float> w = kiln::random_floats(s.out_channels * s.depth(), 8);
      const std::vector<float> bias = kiln::random_floats(s.out_channels, 9);
      const std::vector<float> scale = kiln::random_floats(s.out_channels, 10);
      const std::vector<float> shift = kiln::random_floats(s.out_channels, 11);
      PackedConvWeights packed(w.data(), s.out_channels, s.groups, s.channels / s.groups,
                               s.kernel_h, s.kernel_w, isa);
      ConvOutput output(bias.data());
      output.scale = scale.data();
      output.shift = shift.data();
      output.relu = true;
      std::vector<float> out(static_cast<size_t>(s.batch * s.out_channels * s.out_h * s.out_w));
      conv2d(s, x.data(), packed, output, out.data());
      const std::vector<double> ref = naive(s, x, w, bias.data());
      const int64_t plane = s.out_h * s.out_w;
      int64_t zeros = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const int64_t c = static_cast<int64_t>(i) / plane % s.out_channels;
        const double want = std::max(0.0, ref[i] * scale[c] + shift[c]);
        zeros += want == 0.0;
        ASSERT_NEAR(out[i], want, 1e-4) << i;
      }
      EXPECT_GT(zeros, 0) << "the ReLU never clipped: the test shows nothing";
    }
}

TEST(CpuConv, MismatchedWeightsAreAnError) {
  const std::vector<std::string> isas = families();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2: no direct kernels";
  const std::vector<float> w = kiln::random_floats(8 * 3 * 9, 6);
  PackedConvWeights packed(w.data(), 8, 1, 3, 3, 3, isas[0]);
  const Conv2dShape s = make_shape(1, 4, 6, 6, 8, 1, 3, 3, 1, 1, 1, 1);  // 4 input channels
  std::vector<float> x(4 * 36), out(8 * 36);
  kiln::expect_error([&] { conv2d(s, x.data(), packed, nullptr, out.data()); },
                     {"[conv2d]", "packed weights", "4 input channels", "Fix:"});
}

TEST(CpuConv, GenericFamilyHasNoDirectKernel) {
  EXPECT_FALSE(has_direct_conv("generic"));
  kiln::expect_error([] { PackedConvWeights(nullptr, 1, 1, 1, 1, 1, "generic"); },
                     {"[conv2d]", "generic", "no direct-convolution kernels", "Fix:"});
}

// The eager op (float32 through the direct kernel, float64 through im2col) agrees with the
// naive convolution, and float32 with float64.
TEST(CpuConv, EagerOpUsesDirectKernel) {
  Tensor x = randn({2, 6, 11, 9}), w = randn({12, 3, 3, 3}), b = randn({12});
  Tensor y32 = kiln::nn::functional::conv2d(x, w, b, {2}, {1}, {1}, 2);
  Tensor y64 = kiln::nn::functional::conv2d(x.to(kFloat64), w.to(kFloat64), b.to(kFloat64), {2},
                                            {1}, {1}, 2);
  std::vector<float> yv = y32.to_vector<float>();
  std::vector<double> rv = y64.to_vector<double>();
  ASSERT_EQ(yv.size(), rv.size());
  for (size_t i = 0; i < yv.size(); ++i) ASSERT_NEAR(yv[i], rv[i], 1e-4) << i;
}

}  // namespace
}  // namespace kiln::cpu::gemm
