// What every MLIR code generator (backends/cpu/codegen, backends/cuda/codegen) checks in a fused
// kernel's spec before it builds any MLIR, so a bad spec fails with the kernel and op named and
// a fix instead of an MLIR verifier error. Plain C++: the fusion rules ask supported_dtype()
// too, and this header needs no MLIR.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/dtype.h"
#include "kiln/ir/graph.h"
#include "kiln/scalar_body.h"

namespace kiln::codegen_common {

// The element types generated kernels compute in: float32, float64, int32, int64, bool.
bool supported_dtype(DType t);

// "add %7": how errors name a region node.
std::string node_str(const ir::Node& n);

// The reduction a row kernel's node performs along the last dim (ScalarOp::Add for sum, Max
// for amax, Min for amin), or nothing for an elementwise node. The fuse pass puts only these
// reductions, over the last dim with keepdim, into row groups.
std::optional<ScalarOp> row_reduction_kind(const ir::Node& n);

// Checks what the emitters rely on. `generator` prefixes the errors ("codegen" gives
// "[codegen] kernel 'fused_0': ...").
void check_spec(const cpu::exec::FusedKernelSpec& spec, std::string_view generator);

}  // namespace kiln::codegen_common
