// The kernels the compiled CPU backend runs, as plain C++: the one C signature of every
// generated kernel and the spec of a fusion group's kernel (its iteration space). Shared by
// the code generator (backends/cpu/codegen, which makes kernels from specs) and the executor
// (plan.h, which calls them), so an executor that only loads and runs kernels needs no MLIR
// or LLVM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::cpu::exec {

// buffers: one data pointer per region input (in order), then one per region output.
// dims:    the runtime size of every iteration dim (FusedKernelSpec::dims, static
//          ones included).
// [begin, end): the part of iteration dim 0 to compute, so callers can split the work
//          across threads (0, dims[0]) computes everything.
// An elementwise kernel's output may be exactly an input's buffer (each element is read
// before it is written); no output may partially overlap an input (there are no runtime
// overlap checks). Outputs of 16 MiB or more (32 MiB for row kernels, whose rows must also
// start on cache lines) that start on a 64-byte boundary are written with streaming
// (non-temporal) stores, fenced before the kernel returns.
using FusedKernelFn = void (*)(void* const* buffers, const int64_t* dims, int64_t begin,
                               int64_t end);

// A fusion group, ready for code generation.
//
// The iteration space is the group's iteration shape (fused_iteration_shape) with size-1
// dims dropped and adjacent dims merged where every input broadcasts alike
// (fused_kernel_spec() does this). Each input is a dense row-major array over the iteration
// dims it does not broadcast along; each output is a dense row-major array over all
// iteration dims, except a row kernel's per-row outputs, which have no last dim. Bool
// elements are one byte (0 or 1).
//
// A row kernel (`rows`) reduces the last iteration dim: it is never merged, and there is
// always a dim of rows before it. Per row it runs one loop over the last dim for each
// reduction (computing the reduction's operand from the inputs on the way), then one loop
// that writes the per-element outputs; values that depend only on the row (a max, a mean)
// are computed once per row between the loops.
struct FusedKernelSpec {
  std::string name;  // the kernel's symbol, unique in its module ("fused_0")
  // The fusion group's region: its inputs feed the nodes, every node is an Elementwise op
  // with a scalar_body (or in a row kernel a float sum/amax/amin over the last dim with
  // keepdim), and its outputs are the kernel's outputs. Not owned.
  const ir::Graph* region = nullptr;
  std::vector<int64_t> dims;  // the size of each iteration dim; -1 where known only at run time
  // broadcast[i][d]: region input i is broadcast along iteration dim d (it has one element
  // there, read for every index).
  std::vector<std::vector<bool>> broadcast;
  bool rows = false;  // a row kernel
  // output_per_row[o]: region output o holds one value per row (a row kernel's statistics).
  std::vector<bool> output_per_row;
};

// The spec of a `fused` node of kind "elementwise" or "row": iteration dims from its
// iteration shape (symbolic sizes become -1; fused_dim_groups tells callers which dims of
// that shape each one merges). Throws kiln::Error when an elementwise group's outputs do
// not share one shape, or a row group's outputs are neither its shape nor its row shape.
FusedKernelSpec fused_kernel_spec(const ir::Node& fused_node, std::string name);
// What the group iterates over: an elementwise group's output shape; for a row group the
// shape its reductions reduce along the last dim (symbolic sizes as in the IR).
Shape fused_iteration_shape(const ir::Node& fused_node);
// For each iteration dim of fused_kernel_spec(node), the dims of fused_iteration_shape it
// merges (size-1 dims are dropped; a rank-0 shape gives one dim of size 1 that merges none,
// as does a row kernel's single row).
std::vector<std::vector<int>> fused_dim_groups(const ir::Node& fused_node);

}  // namespace kiln::cpu::exec
