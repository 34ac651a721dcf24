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
  std::string source;
  std::vector<std::string> names;
  const PoolKernel kinds[] = {PoolKernel::Max,      PoolKernel::MaxBackward, PoolKernel::Avg,
                              PoolKernel::AvgBackward, PoolKernel::Adaptive, PoolKernel::AdaptiveBackward};
  for (DType dtype : {kFloat32, kFloat64}) {
    for (PoolKernel kind : kinds) {
      names.push_back("pool" + std::to_string(static_cast<int>(kind)) + "_" + std::string(dtype_name(dtype)));
      source += pool_kernel_source(kind, dtype, names.back());
    }
  }
  const std::string skipped = expect_gpu_toolchain_accepts(source, names);
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

TEST(CudaPoolKernels, TakeFloat32AndFloat64Only) {
  expect_error([] { pool_kernel_source(PoolKernel::Max, kInt64, "p"); },
               {"[cuda] the pooling kernels take float32 or float64, got int64"});
}

}  // namespace
}  // namespace kiln::cuda
