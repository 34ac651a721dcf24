// The eager CUDA convolution kernels (im2col, col2im): NVRTC and ptxas accept them. conv2d and
// its gradients are checked end to end against the CPU kernels in tests/cuda/tensor_test.cpp,
// which runs them on the fake driver (built on the host) and on a GPU.
#include "kiln/cuda/conv_kernels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/kiln.h"
#include "kiln/ops/conv.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

TEST(CudaConvKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  init();
  for (const OpDef* op : {&ops::conv2d, &ops::conv2d_input_grad, &ops::conv2d_weight_grad})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  expect_every_kernel_compiles("conv", {ConvKernel::Im2Col, ConvKernel::Col2Im}, {kFloat32, kFloat64},
                               conv_kernel_source);
}

TEST(CudaConvKernels, TakeFloat32AndFloat64Only) {
  expect_error([] { conv_kernel_source(ConvKernel::Im2Col, kFloat16, "c"); },
               {"[cuda] the convolution kernels take float32 or float64, got float16"});
}

}  // namespace
}  // namespace kiln::cuda
