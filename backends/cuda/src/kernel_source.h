// What every generated CUDA kernel's source shares (elementwise_source.cpp,
// reduction_source.cpp): the GPU's prelude, and how each dtype is stored, loaded and stored
// back.
#pragma once

#include <string>

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

}  // namespace kiln::cuda
