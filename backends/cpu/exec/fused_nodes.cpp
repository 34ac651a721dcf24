// The numbering of a graph's fusion groups, which ties each `fused` node to its kernel's
// symbol in the JIT module and in an exported kernel library alike.
#include "kiln/cpu/exec/plan.h"
#include "kiln/ops/fused.h"

namespace kiln::cpu::exec {

namespace {

void collect(const ir::Graph& g, std::vector<const ir::Node*>& out) {
  for (const auto& node : g.nodes()) {
    if (node->op == &ops::fused) {
      // A "gemm" group runs as a GEMM library call with an epilogue: no generated kernel.
      if (static_cast<const ops::FusedAttrs&>(*node->attrs).kind != "gemm") out.push_back(node.get());
      continue;
    }
    for (const auto& region : node->regions) collect(*region, out);
  }
}

}  // namespace

std::vector<const ir::Node*> fused_nodes(const ir::Graph& graph) {
  std::vector<const ir::Node*> out;
  collect(graph, out);
  return out;
}

std::string fused_kernel_name(size_t index) {
  return "fused_" + std::to_string(index);
}

std::unordered_map<const ir::Node*, FusedKernel> bind_fused_kernels(
    const ir::Graph& graph, const std::function<FusedKernelFn(const std::string&)>& lookup) {
  std::unordered_map<const ir::Node*, FusedKernel> kernels;
  std::vector<const ir::Node*> nodes = fused_nodes(graph);
  for (size_t i = 0; i < nodes.size(); ++i)
    kernels[nodes[i]] = {lookup(fused_kernel_name(i)), fused_iteration_shape(*nodes[i]),
                         fused_dim_groups(*nodes[i])};
  return kernels;
}

}  // namespace kiln::cpu::exec
