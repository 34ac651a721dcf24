// The iteration space of a fusion group: its iteration shape (an elementwise group's output
// shape, a row group's reduced shape) with size-1 dims dropped and adjacent dims merged where
// every input broadcasts alike; a row group keeps its last (reduced) dim apart. Plain C++ (no
// MLIR), so callers that only plan kernels never pay for the MLIR headers.
#include <cstddef>
#include <string>
#include <vector>

#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/reduction.h"

namespace kiln::cpu::exec {

namespace {

// The dims of the output shape that iterate (size != 1), and each input's broadcast flag
// along each of them, before merging.
struct UnmergedSpace {
  std::vector<int> dims;                     // indices into the output shape
  std::vector<std::vector<bool>> broadcast;  // [input][position in dims]
};

std::string node_name(const ir::Node& n) {
  std::string out = "fused node";
  for (size_t i = 0; i < n.outputs.size(); ++i)
    out += (i == 0 ? " %" : ", %") + std::to_string(n.outputs[i]->id);
  return out;
}

// "[s0, 10]": a shape whose sizes may be symbolic.
std::string shape_text(const Shape& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + ir::format_size(shape[d]);
  return out + "]";
}

bool is_row_group(const ir::Node& n) {
  return n.op == &ops::fused && static_cast<const ops::FusedAttrs&>(*n.attrs).kind == "row";
}

// The one shape every output of an elementwise group shares.
const Shape& output_shape(const ir::Node& n) {
  KILN_CHECK(!n.outputs.empty(), "[codegen] expected ", node_name(n),
             " to have at least one output, found none. Fix: the fusion pass must not create "
             "a group without results.");
  const ir::Type& first = n.outputs[0]->type;
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    const ir::Type& t = n.outputs[i]->type;
    KILN_CHECK(t.shape == first.shape, "[codegen] expected every output of ", node_name(n),
               " to have one shape (the kernel's iteration shape), found ", ir::type_str(first),
               " for output 0 and ", ir::type_str(t), " for output ", i,
               ". Fix: fuse only ops whose results share a shape into one elementwise group.");
  }
  return first.shape;
}

// A row group's iteration shape: what its reductions read. Every output has that shape or
// its row shape (the last dim 1).
Shape row_iteration_shape(const ir::Node& n) {
  KILN_CHECK(!n.regions.empty(), "[codegen] expected ", node_name(n),
             " to hold its ops in a region, found none. Fix: build fusion groups with the fuse "
             "pass.");
  const ir::Node* reduction = nullptr;
  for (const auto& op : n.regions[0]->nodes())
    if (op->op->lowering == LoweringClass::Reduction) {
      reduction = op.get();
      break;
    }
  KILN_CHECK(reduction && !reduction->inputs.empty() && reduction->inputs[0] &&
                 !reduction->inputs[0]->type.shape.empty(),
             "[codegen] expected the row group ", node_name(n),
             " to hold a reduction over the last dim of a tensor, found none. Fix: mark a "
             "group \"row\" only when it holds one (the fuse pass does).");
  Shape shape = reduction->inputs[0]->type.shape;
  for (const auto& op : n.regions[0]->nodes())
    KILN_CHECK(op->op->lowering != LoweringClass::Reduction ||
                   (!op->inputs.empty() && op->inputs[0] && op->inputs[0]->type.shape == shape),
               "[codegen] expected every reduction of the row group ", node_name(n),
               " to reduce the shape ", shape_text(shape), ", found ",
               (op->inputs.empty() || !op->inputs[0] ? std::string("no operand")
                                                     : ir::type_str(op->inputs[0]->type)),
               " for ", op->op->name, " %", op->outputs.at(0)->id,
               ". Fix: a row kernel loops over one row length; the fuse pass keeps other "
               "reductions in groups of their own.");
  Shape per_row = shape;
  per_row.back() = 1;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const ir::Type& t = n.outputs[i]->type;
    KILN_CHECK(t.shape == shape || t.shape == per_row, "[codegen] expected output ", i, " of ",
               node_name(n), " to have the row group's shape ", shape_text(shape),
               " or its row shape ", shape_text(per_row), ", found ", ir::type_str(t),
               ". Fix: a row group's results are per element or per row of what it reduces.");
  }
  return shape;
}

UnmergedSpace unmerged_space(const ir::Node& n) {
  const bool row = is_row_group(n);
  const Shape out = fused_iteration_shape(n);
  const auto out_rank = static_cast<int64_t>(out.size());
  UnmergedSpace space;
  for (int d = 0; d < static_cast<int>(out.size()); ++d)
    if (out[d] != 1 || (row && d + 1 == out_rank)) space.dims.push_back(d);

  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ir::Value* v = n.inputs[i];
    KILN_CHECK(v != nullptr, "[codegen] expected operand ", i, " of ", node_name(n),
               " to be present, found an absent operand. Fix: a fusion group takes only "
               "present values.");
    const Shape& in = v->type.shape;
    const auto offset = out_rank - static_cast<int64_t>(in.size());  // numpy right alignment
    for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k) {
      int64_t d = k + offset;
      bool fits = in[k] == 1 || (d >= 0 && in[k] == out[d]);
      KILN_CHECK(fits, "[codegen] expected operand ", i, " of ", node_name(n), " (",
                 ir::type_str(v->type), ") to broadcast to the iteration shape ", shape_text(out),
                 ", found dim ", k, " of size ", ir::format_size(in[k]),
                 ". Fix: a fusion group's inputs must broadcast to its iteration shape.");
    }
    std::vector<bool> flags;
    for (int d : space.dims) {
      int64_t k = d - offset;
      flags.push_back(k < 0 || in[k] == 1);
    }
    space.broadcast.push_back(std::move(flags));
  }
  return space;
}

bool broadcasts_alike(const UnmergedSpace& space, size_t a, size_t b) {
  for (const std::vector<bool>& flags : space.broadcast)
    if (flags[a] != flags[b]) return false;
  return true;
}

// Groups of positions in space.dims that merge into one iteration dim. A row group's last
// position stays alone (its kernel loops over it per row), after at least one group of
// rows: an empty group stands for a single row.
std::vector<std::vector<size_t>> merged_positions(const UnmergedSpace& space, bool row) {
  std::vector<std::vector<size_t>> groups;
  const size_t outer = row ? space.dims.size() - 1 : space.dims.size();
  for (size_t p = 0; p < outer; ++p) {
    if (!groups.empty() && broadcasts_alike(space, groups.back().back(), p))
      groups.back().push_back(p);
    else
      groups.push_back({p});
  }
  if (row) {
    if (groups.empty()) groups.push_back({});
    groups.push_back({outer});
  }
  return groups;
}

}  // namespace

Shape fused_iteration_shape(const ir::Node& fused_node) {
  return is_row_group(fused_node) ? row_iteration_shape(fused_node) : output_shape(fused_node);
}

FusedKernelSpec fused_kernel_spec(const ir::Node& fused_node, std::string name) {
  const bool row = is_row_group(fused_node);
  UnmergedSpace space = unmerged_space(fused_node);
  const Shape out = fused_iteration_shape(fused_node);
  FusedKernelSpec spec;
  spec.name = std::move(name);
  spec.region = fused_node.regions.empty() ? nullptr : fused_node.regions[0].get();
  spec.rows = row;
  spec.broadcast.resize(fused_node.inputs.size());
  for (const ir::Value* v : fused_node.outputs)
    spec.output_per_row.push_back(row && out.back() != 1 && v->type.shape != out);

  std::vector<std::vector<size_t>> groups = merged_positions(space, row);
  if (groups.empty()) {  // rank 0 or every dim of size 1: one element
    spec.dims = {1};
    for (std::vector<bool>& flags : spec.broadcast) flags = {false};
    return spec;
  }
  for (const std::vector<size_t>& group : groups) {
    int64_t size = 1;
    for (size_t p : group) {
      int64_t d = out[space.dims[p]];
      if (size < 0 || ir::is_symbolic_size(d))
        size = -1;  // known only at run time
      else
        size *= d;
    }
    spec.dims.push_back(size);
    // Inputs broadcast alike across a group: its first position speaks for all (a group of
    // no positions is a single row, which every input has).
    for (size_t i = 0; i < space.broadcast.size(); ++i)
      spec.broadcast[i].push_back(group.empty() || space.broadcast[i][group.front()]);
  }
  return spec;
}

std::vector<std::vector<int>> fused_dim_groups(const ir::Node& fused_node) {
  UnmergedSpace space = unmerged_space(fused_node);
  std::vector<std::vector<size_t>> groups = merged_positions(space, is_row_group(fused_node));
  if (groups.empty()) return {{}};
  std::vector<std::vector<int>> out;
  for (const std::vector<size_t>& group : groups) {
    std::vector<int> dims;
    for (size_t p : group) dims.push_back(space.dims[p]);
    out.push_back(std::move(dims));
  }
  return out;
}

}  // namespace kiln::cpu::exec
