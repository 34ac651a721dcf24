// The eager CUDA nll_loss kernels, checked without a GPU as the other generated kernels are
// (cuda/generated_kernels.h): NVRTC and ptxas accept them, and on the host they give the CPU
// kernels' per-element losses and gradients, with and without class weights, with ignored
// targets, for [N, C] and [N, C, d] inputs.
#include "kiln/cuda/loss_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/loss.h"
#include "test_util.h"
#include "values_close.h"

namespace kiln::cuda {
namespace {

std::string sources() {
  std::string out;
  for (DType dtype : {kFloat32, kFloat64}) {
    const std::string suffix = dtype == kFloat32 ? "f32" : "f64";
    out += nll_loss_kernel_source(dtype, "nll_" + suffix);
    out += nll_loss_backward_kernel_source(dtype, "nll_backward_" + suffix);
    out += binary_cross_entropy_kernel_source(dtype, "bce_" + suffix);
  }
  return out;
}

TEST(CudaLossKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  init();
  for (const OpDef* op : {&ops::nll_loss, &ops::nll_loss_backward, &ops::binary_cross_entropy,
                          &ops::binary_cross_entropy_with_logits})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  const std::string skipped = expect_gpu_toolchain_accepts(
      sources(), {"nll_f32", "nll_backward_f32", "bce_f32", "nll_f64", "nll_backward_f64", "bce_f64"});
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

TEST(CudaLossKernels, LossesWeightsAndGradientsAreTheCpuKernels) {
  if (const std::string why = host_build_unavailable(); !why.empty()) GTEST_SKIP() << why;
  init();
  const std::filesystem::path dir = scratch_dir("cuda_loss");
  std::shared_ptr<void> library = build_on_host(sources(), dir);
  ASSERT_TRUE(library);
  using Forward = void (*)(const void*, const void*, const void*, void*, void*, long long, long long,
                           long long, long long);
  using Backward = void (*)(const void*, int, const void*, const void*, const void*, void*, long long,
                            long long, long long, long long);
  manual_seed(11);
  for (DType dtype : {kFloat32, kFloat64}) {
    const std::string suffix = dtype == kFloat32 ? "f32" : "f64";
    auto forward = reinterpret_cast<Forward>(dlsym(library.get(), ("nll_" + suffix).c_str()));
    auto backward = reinterpret_cast<Backward>(dlsym(library.get(), ("nll_backward_" + suffix).c_str()));
    ASSERT_TRUE(forward && backward);
    for (bool spatial : {false, true}) {
      for (bool weighted : {false, true}) {
        const Shape input_shape = spatial ? Shape{2, 5, 3} : Shape{6, 5};
        const Shape target_shape = spatial ? Shape{2, 3} : Shape{6};
        const Tensor input = nn::functional::log_softmax(randn(input_shape), 1).to(dtype);
        const Tensor target = Tensor::from_vector<int64_t>(
            spatial ? std::vector<int64_t>{4, 0, -100, 2, 2, 1} : std::vector<int64_t>{1, 4, -100, 0, 3, 4},
            target_shape);
        const Tensor weight = weighted ? (rand({5}) + 0.5).to(dtype) : Tensor();
        SCOPED_TRACE(suffix + (spatial ? " [N, C, d]" : " [N, C]") + (weighted ? " weighted" : ""));
        const long long n = target.numel(), classes = 5, inner = spatial ? 3 : 1, ignore = -100;

        ops::NllLossAttrs none;
        none.reduction = "none";
        const Tensor want = dispatch(ops::nll_loss, std::vector<Tensor>{input, target, weight}, none)[0];
        Tensor losses = Tensor::empty({n}, dtype), weights = Tensor::empty({n}, dtype);
        forward(input.raw_data(), target.raw_data(), weighted ? weight.raw_data() : nullptr,
                losses.raw_data(), weights.raw_data(), n, classes, inner, ignore);
        count_mismatches(losses.to_vector<double>(), want.reshape({n}).to_vector<double>(), 1e-6, 0,
                         "losses");
        std::vector<double> expected_weights;
        const std::vector<double> w = weighted ? weight.to_vector<double>() : std::vector<double>(5, 1.0);
        for (int64_t t : target.to_vector<int64_t>()) expected_weights.push_back(t == ignore ? 0 : w[static_cast<size_t>(t)]);
        count_mismatches(weights.to_vector<double>(), expected_weights, 1e-7, 0, "weights");
        // Without an input (the backward's total weight), the weights alone.
        Tensor weights_only = Tensor::empty({n}, dtype);
        forward(nullptr, target.raw_data(), weighted ? weight.raw_data() : nullptr, nullptr, weights_only.raw_data(),
                n, classes, inner, ignore);
        count_mismatches(weights_only.to_vector<double>(), expected_weights, 1e-7, 0, "weights only");

        for (const char* reduction : {"none", "sum", "mean"}) {
          ops::NllLossBackwardAttrs attrs;
          attrs.reduction = reduction;
          attrs.input_shape = input_shape;
          const bool per_element = std::string(reduction) == "none";
          const Tensor grad = per_element ? (randn(target_shape) + 1).to(dtype) : Tensor::scalar(0.75, dtype);
          const Tensor want_grad =
              dispatch(ops::nll_loss_backward, std::vector<Tensor>{grad, target, weight}, attrs)[0];
          double total = 0;
          for (double x : expected_weights) total += x;
          const Tensor divisor = Tensor::scalar(total, dtype);  // the mean's, summed on the GPU
          Tensor got = zeros(input_shape, dtype);
          backward(grad.raw_data(), per_element ? 1 : 0, target.raw_data(),
                   weighted ? weight.raw_data() : nullptr,
                   std::string(reduction) == "mean" ? divisor.raw_data() : nullptr, got.raw_data(), n, classes,
                   inner, ignore);
          // The mean's divisor is summed in the loss's dtype on the GPU, in float64 on the cpu.
          count_mismatches(got.to_vector<double>(), want_grad.to_vector<double>(), 1e-6, 0,
                           std::string("gradient, reduction ") + reduction);
        }
      }
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::cuda
