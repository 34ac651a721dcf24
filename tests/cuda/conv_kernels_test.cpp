// The eager CUDA convolution kernels (im2col, col2im): NVRTC and ptxas accept them; and the
// loading of cuDNN, which convolutions use instead where it is present. conv2d and its
// gradients are checked end to end against the CPU kernels, with cuDNN and without, in
// tests/cuda/tensor_test.cpp, which runs them on the fake driver (built on the host, with the
// fake cuDNN) and on a GPU.
#include "kiln/cuda/conv_kernels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/cuda/cudnn.h"
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

TEST(CudaCudnn, TheLibraryIsFoundOrTheReasonSaysWhatWasTried) {
  const cudnn::Loaded& dnn = cudnn::loaded();
  if (!dnn.api) {
    EXPECT_FALSE(dnn.unavailable_reason.empty());
    GTEST_SKIP() << "no cuDNN: " << dnn.unavailable_reason;
  }
  EXPECT_GE(dnn.version, 80000u) << dnn.library;
  EXPECT_EQ(cudnn::status_name(cudnn::kSuccess), "CUDNN_STATUS_SUCCESS");
}

TEST(CudaCudnn, AMissingPathOrALibraryThatIsNotCudnnIsNamedAndZeroTurnsItOff) {
  cudnn::Loaded missing = cudnn::load("/nonexistent/libcudnn.so.9");
  EXPECT_EQ(missing.api, nullptr);
  for (const char* part : {"cuDNN could not be loaded from /nonexistent/libcudnn.so.9 (set by KILN_CUDNN)",
                           "Fix: install cuDNN 9", "Without it convolutions run as im2col + cuBLASLt"})
    EXPECT_NE(missing.unavailable_reason.find(part), std::string::npos) << missing.unavailable_reason;
  cudnn::Loaded wrong = cudnn::load("libm.so.6");
  EXPECT_EQ(wrong.api, nullptr);
  EXPECT_NE(wrong.unavailable_reason.find("libm.so.6 has no cudnnGetVersion"), std::string::npos)
      << wrong.unavailable_reason;
  EXPECT_EQ(cudnn::load("0").unavailable_reason, "cuDNN is off (KILN_CUDNN=0)");
}

TEST(CudaConvKernels, TakeFloat32AndFloat64Only) {
  expect_error([] { conv_kernel_source(ConvKernel::Im2Col, kFloat16, "c"); },
               {"[cuda] the convolution kernels take float32 or float64, got float16"});
}

}  // namespace
}  // namespace kiln::cuda
