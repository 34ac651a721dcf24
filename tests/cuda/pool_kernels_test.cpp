// The eager CUDA pooling kernels: NVRTC and ptxas accept every one of them. Their values are
// checked end to end against the CPU kernels in tests/cuda/tensor_test.cpp, which runs them on
// the fake driver (built on the host) and on a GPU.
#include "kiln/cuda/pool_kernels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/generated_kernels.h"
#include "kiln/kiln.h"
#include "kiln/ops/pool.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

TEST(CudaPoolKernels, NvrtcCompilesThemAndPtxasAssemblesThem) {
  init();
  for (const OpDef* op : {&ops::max_pool2d, &ops::max_pool2d_backward, &ops::avg_pool2d, &ops::avg_pool2d_backward,
                          &ops::adaptive_avg_pool2d, &ops::adaptive_avg_pool2d_backward})
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name;
  expect_every_kernel_compiles(
      "pool",
      {PoolKernel::Max, PoolKernel::MaxBackward, PoolKernel::Avg, PoolKernel::AvgBackward, PoolKernel::Adaptive,
       PoolKernel::AdaptiveBackward},
      {kFloat32, kFloat64}, pool_kernel_source);
}

TEST(CudaPoolKernels, TakeFloat32AndFloat64Only) {
  expect_error([] { pool_kernel_source(PoolKernel::Max, kInt64, "p"); },
               {"[cuda] the pooling kernels take float32 or float64, got int64"});
}

}  // namespace
}  // namespace kiln::cuda
