// Eager reduction kernels on GPUs: sum, prod, amax, amin, all and any over any set of dims,
// generated as CUDA C like the elementwise kernels (kiln/cuda/elementwise_kernels.h) and
// compiled by NVRTC at first use. One block computes one output element at a time (a
// grid-stride loop over the outputs): its threads stride over the reduced elements, then
// combine through warp shuffles and shared memory. The combining step is the op's
// ScalarOp (Add, Mul, NaN-propagating Max/Min, And, Or), written by the same builder as the
// elementwise kernels' bodies.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "kiln/op.h"

namespace kiln::cuda {

enum class ReductionKind : uint8_t { Sum, Prod, Max, Min, All, Any };

// Where the kept and the reduced elements of the input are, after merging the dims that
// allow it and dropping those of size 1.
struct ReductionPlan {
  static constexpr int kMaxDims = 8;
  int64_t outputs = 1;  // kept elements: the output, row-major over the kept dims
  int64_t reduced = 1;  // elements combined into each output
  int kept_rank = 0, reduced_rank = 0;
  std::array<int64_t, kMaxDims> kept_sizes{}, kept_strides{};
  std::array<int64_t, kMaxDims> reduced_sizes{}, reduced_strides{};
};

// The plan for reducing `input` over the dims in `mask` (bit d: dim d). Throws kiln::Error
// when more than kMaxDims kept or reduced dims stay apart after merging.
ReductionPlan plan_reduction(const Tensor& input, uint64_t mask);

// The struct the kernels take after their pointers and counts (KilnReduceDims in the source).
struct ReduceKernelDims {
  int64_t kept_sizes[ReductionPlan::kMaxDims], kept_strides[ReductionPlan::kMaxDims];
  int64_t reduced_sizes[ReductionPlan::kMaxDims], reduced_strides[ReductionPlan::kMaxDims];
};
ReduceKernelDims reduce_kernel_dims(const ReductionPlan& plan);

std::string reduction_kernel_key(ReductionKind kind, DType input, DType output,
                                 const ReductionPlan& plan);

// The CUDA C of one kernel named `name`: `extern "C" __global__ void name(const TI* in, TO* out,
// long long outputs, long long reduced, KilnReduceDims dims)`. Accumulates in the output's
// dtype (int64 for integer sums, as the CPU kernels). The GPU's prelude is guarded by
// KILN_REDUCTION_PRELUDE (and the elementwise one by KILN_KERNEL_PRELUDE), so tests can
// compile the kernel on the host, where each block has one thread.
std::string reduction_kernel_source(ReductionKind kind, DType input, DType output,
                                    const ReductionPlan& plan, const std::string& name);

// max_dim / min_dim: `extern "C" __global__ void name(const T* in, T* values, long long* indices,
// long long outputs, long long reduced, KilnReduceDims dims)`, the reduced dim being one dim.
// The first extreme element wins (the first NaN, if any), as on the CPU.
std::string arg_reduction_kernel_source(bool max, DType dtype, const ReductionPlan& plan,
                                        const std::string& name);

// Fills the CUDA kernel slots of sum, prod, amax, amin, all, any, max_dim and min_dim.
void register_reduction_kernels();

}  // namespace kiln::cuda
