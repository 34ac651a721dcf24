// What every generated CUDA kernel's source shares (elementwise_source.cpp,
// reduction_source.cpp, softmax_kernels.cpp): the GPU's prelude, and how each dtype is stored, loaded and stored
// back.
#pragma once

#include <string>
#include <vector>

#include "cuda_c_builder.h"
#include "kiln/dtype.h"

namespace kiln::cuda {

// Qualifiers, the grid-stride loop, float16/bfloat16 conversions and the dims struct, guarded
// by KILN_KERNEL_PRELUDE: tests define it, and host versions of these, before a kernel.
extern const char* const kKernelPrelude;

// The C type a tensor of `dtype` is stored as (bool as unsigned char, float16 and bfloat16 as
// unsigned short).
const char* storage_type(DType dtype);
// The expression reading `element` (of storage_type) as a value of its compute type
// (CudaCBuilder::compute_type), and the one storing `value` back.
std::string load(DType dtype, const std::string& element);
std::string store(DType dtype, const std::string& value);

// Statements adding to `offset` the offset of flat index `flat` over `rank` dims (row-major)
// of the KilnReduceDims arrays `sizes` and `strides` (empty for rank 0).
std::string offset_code(const std::string& flat, const std::string& offset, const char* sizes,
                        const char* strides, int rank, const std::string& indent);

// A device function `function(type v)` combining the values of a block's threads with the
// device function `combine` (warp shuffles, then the warps' results through shared memory).
// Thread 0 ends with the block's value, or every thread does when `to_all_threads`. On the
// host (KILN_COOPERATIVE_BLOCKS 0, one thread per block) it returns v.
std::string block_reduce_source(const std::string& function, const std::string& type,
                                const std::string& combine, const std::string& identity,
                                bool to_all_threads);

// A device function `name(a0, ..., a{arity-1})` of values of `dtype`, whose body
// `build(builder, parameters)` writes with CudaCBuilder; it returns a value of `dtype`.
template <class Build>
std::string device_function(const std::string& name, DType dtype, int arity, Build&& build) {
  CudaCBuilder b;
  std::string params;
  std::vector<ScalarValue> args;
  for (int i = 0; i < arity; ++i) {
    args.push_back(b.parameter("a" + std::to_string(i), dtype));
    params += std::string(i ? ", " : "") + CudaCBuilder::compute_type(dtype) + " a" + std::to_string(i);
  }
  const ScalarValue result = build(b, args);
  return "KILN_DEVICE " + std::string(CudaCBuilder::compute_type(dtype)) + " " + name + "(" +
         params + ") {\n" + b.statements() + "  return " + b.name(result) + ";\n}\n";
}

}  // namespace kiln::cuda
