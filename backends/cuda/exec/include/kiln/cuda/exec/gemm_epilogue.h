// GEMM epilogues: a Linear layer's bias and activation applied by cuBLASLt as it stores the
// product, instead of by a kernel of their own that reads the product back from memory.
//
// After fusion, a matmul whose only reader is an elementwise fusion group computing exactly
//
//   y = act(x · w + bias)     act: none, relu, or gelu with the tanh approximation
//                             bias: [N] (optional when act is not none)
//
// becomes one fused node of kind "gemm" (inputs x, w and the bias; its region holds the matmul
// and the group's ops, so the reference executor still runs it op by op). GraphRunner runs a
// "gemm" group as one cuBLASLt call (cuda::matmul_with_epilogue); it is not a generated
// kernel (cpu::exec::fused_nodes leaves it out). GELU with erf is not matched: cuBLASLt's
// GELU is the tanh approximation.
#pragma once

#include <optional>

#include "kiln/cuda/gemm.h"
#include "kiln/ir/graph.h"

namespace kiln::cuda::exec {

// What a "gemm" group computes, read from its region.
struct GemmGroup {
  bool bias = false;  // its third input is the bias
  GemmActivation activation = GemmActivation::None;
};

// The "gemm" group `node` describes, or nullopt when `node` is not one.
std::optional<GemmGroup> gemm_group(const ir::Node& node);

// Rewrites each matmul + epilogue group of `graph` (top level; float32 on a GPU)
// into a "gemm" group. Returns how many.
int fuse_gemm_epilogues(ir::Graph& graph);

}  // namespace kiln::cuda::exec
