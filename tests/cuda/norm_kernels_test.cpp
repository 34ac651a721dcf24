// The eager CUDA layer_norm and batch_norm kernels: NVRTC and ptxas accept every one of them.
// Their values are checked end to end against the CPU kernels in tests/cuda/tensor_test.cpp,
// which runs them on the fake driver (built on the host) and on a GPU.
#include "kiln/cuda/norm_kernels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/kiln.h"
#include "kiln/ops/norm.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

TEST(CudaNormKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  init();
  for (const OpDef* op : {&ops::layer_norm, &ops::layer_norm_backward, &ops::batch_norm, &ops::batch_norm_backward})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  expect_every_kernel_compiles(
      "norm",
      {NormKernel::LayerNorm, NormKernel::LayerNormGrad, NormKernel::LayerNormParams, NormKernel::BatchStats,
       NormKernel::BatchGradStats, NormKernel::ChannelAffine},
      {kFloat32, kFloat64}, norm_kernel_source);
}

TEST(CudaNormKernels, TakeFloat32AndFloat64Only) {
  expect_error([] { norm_kernel_source(NormKernel::LayerNorm, kBFloat16, "n"); },
               {"[cuda] the norm kernels take float32 or float64, got bfloat16"});
}

}  // namespace
}  // namespace kiln::cuda
