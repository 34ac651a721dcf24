// The iteration space of an elementwise fusion group: its output shape with size-1 dims
// dropped and adjacent dims merged where every input broadcasts alike. Plain C++ (no MLIR),
// so callers that only plan kernels never pay for the MLIR headers.
#include <cstddef>
#include <string>
#include <vector>

#include "kiln/codegen/kernels.h"
#include "kiln/error.h"
#include "kiln/ir/symbols.h"

namespace kiln::codegen {

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

// The iteration shape: the one shape every output shares.
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

UnmergedSpace unmerged_space(const ir::Node& n) {
  const Shape& out = output_shape(n);
  const auto out_rank = static_cast<int64_t>(out.size());
  UnmergedSpace space;
  for (int d = 0; d < static_cast<int>(out.size()); ++d)
    if (out[d] != 1) space.dims.push_back(d);

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
                 ir::type_str(v->type), ") to broadcast to the iteration shape ",
                 ir::type_str(n.outputs[0]->type), ", found dim ", k, " of size ",
                 ir::format_size(in[k]),
                 ". Fix: an elementwise group's inputs must broadcast to its output shape.");
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

// Groups of positions in space.dims that merge into one iteration dim.
std::vector<std::vector<size_t>> merged_positions(const UnmergedSpace& space) {
  std::vector<std::vector<size_t>> groups;
  for (size_t p = 0; p < space.dims.size(); ++p) {
    if (!groups.empty() && broadcasts_alike(space, groups.back().back(), p))
      groups.back().push_back(p);
    else
      groups.push_back({p});
  }
  return groups;
}

}  // namespace

ElementwiseKernelSpec elementwise_spec(const ir::Node& fused_node, std::string name) {
  UnmergedSpace space = unmerged_space(fused_node);
  const Shape& out = fused_node.outputs[0]->type.shape;
  ElementwiseKernelSpec spec;
  spec.name = std::move(name);
  spec.region = fused_node.regions.empty() ? nullptr : fused_node.regions[0].get();
  spec.broadcast.resize(fused_node.inputs.size());

  std::vector<std::vector<size_t>> groups = merged_positions(space);
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
    // Inputs broadcast alike across a group: its first position speaks for all.
    for (size_t i = 0; i < space.broadcast.size(); ++i)
      spec.broadcast[i].push_back(space.broadcast[i][group.front()]);
  }
  return spec;
}

std::vector<std::vector<int>> elementwise_dim_groups(const ir::Node& fused_node) {
  UnmergedSpace space = unmerged_space(fused_node);
  std::vector<std::vector<size_t>> groups = merged_positions(space);
  if (groups.empty()) return {{}};
  std::vector<std::vector<int>> out;
  for (const std::vector<size_t>& group : groups) {
    std::vector<int> dims;
    for (size_t p : group) dims.push_back(space.dims[p]);
    out.push_back(std::move(dims));
  }
  return out;
}

}  // namespace kiln::codegen
