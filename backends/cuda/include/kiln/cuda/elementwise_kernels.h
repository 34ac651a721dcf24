// Eager elementwise kernels on GPUs. Every op of the table with a scalar body (add, exp,
// where, cast, gelu, ...) runs on CUDA tensors through one kernel generated per op,
// attributes, dtypes and layout: CUDA C made from the op's scalar body (the same definition
// the CPU and GPU code generators compile), compiled by NVRTC at its first use and kept for
// the process.
//
// The layout is planned from the tensors' strides, so broadcasting and views need no copies:
// dims merge where every operand allows it, an input laid out like the output is read at the
// flat index, a one-element input once, any other through its strides.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/op.h"

namespace kiln::cuda {

inline constexpr int kMaxKernelDims = 8;
inline constexpr int kMaxKernelInputs = 4;

// How a kernel reads one input.
enum class InputAccess : uint8_t {
  Dense,    // laid out like the output: element i at offset i
  Single,   // one element, read for every output element
  Strided,  // through its strides over the plan's merged dims
};

struct ElementwisePlan {
  int64_t numel = 0;
  int rank = 0;  // merged dims the kernel indexes (0 when no input is strided)
  std::array<int64_t, kMaxKernelDims> sizes{};
  std::vector<InputAccess> access;                             // per input
  std::vector<std::array<int64_t, kMaxKernelDims>> strides;    // per input, in elements
  // An input shares memory with the output (an in-place op): the kernel's pointers then
  // drop __restrict__, which would let the compiler reorder its reads and writes.
  bool output_aliases_input = false;
};

// The plan for inputs broadcast to `out_sizes` (a contiguous output). Throws kiln::Error when
// more than kMaxKernelDims dims stay apart after merging, or for too many inputs.
ElementwisePlan plan_elementwise(std::span<const Tensor> inputs, IntList out_sizes);

// The struct the kernels take after their pointers and the element count (KilnDims in the
// source): the merged sizes, and each input's strides.
struct KernelDims {
  int64_t sizes[kMaxKernelDims];
  int64_t strides[kMaxKernelInputs][kMaxKernelDims];
};
KernelDims kernel_dims(const ElementwisePlan& plan);

// What tells two kernels apart: op, attributes, dtypes and the plan's access pattern (not
// its sizes, which are parameters). Also a valid C identifier part when `identifier`.
std::string elementwise_kernel_key(const OpDef& op, const Attrs& attrs,
                                   std::span<const DType> inputs, DType output,
                                   const ElementwisePlan& plan);

// The CUDA C of one kernel named `name`: `extern "C" __global__ void name(const T0* in0, ...,
// TO* out, long long n, KilnDims dims)`, a grid-stride loop over the output's elements. The
// GPU prelude (qualifiers, float16 conversions) is guarded by KILN_KERNEL_PRELUDE, so tests can
// compile the same kernel on the host with a prelude of their own.
std::string elementwise_kernel_source(const OpDef& op, const Attrs& attrs,
                                      std::span<const DType> inputs, DType output,
                                      const ElementwisePlan& plan, const std::string& name);

// A contiguous copy of the GPU tensor `x` on its GPU, and filling the contiguous GPU tensor
// `out` with `value`, both through cast's generated kernel (for other CUDA kernels).
Tensor contiguous_on_gpu(const Tensor& x);
void fill_on_gpu(const Tensor& out, double value);

// Fills the CUDA kernel slot of every op with a scalar body, of full (one value broadcast by
// cast's kernel) and of clone (copy_, contiguous(): cast's kernel when both sides are on the
// GPU). register_backend calls it.
void register_elementwise_kernels();

}  // namespace kiln::cuda
