// Eager elementwise kernels on GPUs. Every op of the table with a scalar body (add, exp,
// where, cast, gelu, ...) runs on CUDA tensors through one kernel generated per op,
// attributes, dtypes and layout: CUDA C made from the op's scalar body (the same definition
// the CPU and GPU code generators compile), compiled by NVRTC at its first use and kept for
// the process.
//
// The layout is planned from the tensors' strides, so broadcasting and views need no copies:
// dims merge where every operand allows it, an input laid out like the output is read at the
// flat index, a one-element input once, any other through its strides. A 0-d host tensor (the
// 2 of x * 2) is passed by value, so it is never copied to the GPU. The output may be a view
// too (in-place ops on slices, copy_ into a view, cat's parts), written through its strides.
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
  Value,    // a host scalar (infer::is_host_scalar), its value a kernel parameter: planned as
            // Single, then set by the kernel (read_host_scalars_by_value)
};

struct ElementwisePlan {
  int64_t numel = 0;
  int rank = 0;  // merged dims the kernel indexes (0 when no operand is strided)
  std::array<int64_t, kMaxKernelDims> sizes{};
  std::vector<InputAccess> access;                             // per input
  std::vector<std::array<int64_t, kMaxKernelDims>> strides;    // per input, in elements
  // The output: written at the flat index when dense, else through its strides.
  bool output_strided = false;
  std::array<int64_t, kMaxKernelDims> output_strides{};
  // An input shares memory with the output (an in-place op): the kernel's pointers then
  // drop __restrict__, which would let the compiler reorder its reads and writes.
  bool output_aliases_input = false;
};

// The plan for inputs broadcast to `out_sizes`, written to an output with `out_strides` (none:
// contiguous). Throws kiln::Error when more than kMaxKernelDims dims stay apart after
// merging, or for too many inputs.
ElementwisePlan plan_elementwise(std::span<const Tensor> inputs, IntList out_sizes,
                                 IntList out_strides = {});
// Marks the inputs that are not on `device` (host scalars, the only ones dispatch lets join a
// device's elementwise op) to be passed by value.
void read_host_scalars_by_value(ElementwisePlan& plan, std::span<const Tensor> inputs, Device device);

// The struct the kernels take after their pointers and the element count (KilnDims in the
// source): the merged sizes, each input's strides, then the output's.
struct KernelDims {
  int64_t sizes[kMaxKernelDims];
  int64_t strides[kMaxKernelInputs + 1][kMaxKernelDims];
};
KernelDims kernel_dims(const ElementwisePlan& plan);

// What tells two kernels apart: op, attributes, dtypes and the plan's access pattern (not
// its sizes, which are parameters). Also a valid C identifier part when `identifier`.
std::string elementwise_kernel_key(const OpDef& op, const Attrs& attrs,
                                   std::span<const DType> inputs, DType output,
                                   const ElementwisePlan& plan);

// The CUDA C of one kernel named `name`: `extern "C" __global__ void name(const T0* in0, ...,
// TO* out, long long n, KilnDims dims)` (`T0 in0` for an input read by value), a grid-stride loop over the output's elements. The
// GPU prelude (qualifiers, float16 conversions) is guarded by KILN_KERNEL_PRELUDE, so tests can
// compile the same kernel on the host with a prelude of their own.
std::string elementwise_kernel_source(const OpDef& op, const Attrs& attrs,
                                      std::span<const DType> inputs, DType output,
                                      const ElementwisePlan& plan, const std::string& name);

// A contiguous copy of the GPU tensor `x` on its GPU, filling the GPU tensor or view `out`
// with `value`, and copying `x` (converted to out's dtype) into the GPU view `out`, all through
// cast's generated kernel (for other CUDA kernels: cat, pad, slice_scatter, ...).
Tensor contiguous_on_gpu(const Tensor& x);
void fill_on_gpu(const Tensor& out, double value);
void copy_on_gpu(const Tensor& x, const Tensor& out);

// Fills the CUDA kernel slot of every op with a scalar body, of full (one value broadcast by
// cast's kernel) and of clone (copy_, contiguous(): cast's kernel when both sides are on one
// GPU). register_backend calls it.
void register_elementwise_kernels();

}  // namespace kiln::cuda
