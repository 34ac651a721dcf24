// GEMM epilogues (gemm_epilogue.h): matching a fusion group that only adds a bias to a matmul's
// product and applies an activation, and the "gemm" group that replaces the pair.
#include "kiln/cuda/exec/gemm_epilogue.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/linalg.h"

namespace kiln::cuda::exec {

namespace {

bool is_group_of_kind(const ir::Node& n, const char* kind) {
  return n.op == &ops::fused && static_cast<const ops::FusedAttrs&>(*n.attrs).kind == kind;
}

// The activation `n` applies, when cuBLASLt has it.
std::optional<GemmActivation> activation_of(const ir::Node& n) {
  if (n.op == &ops::relu) return GemmActivation::Relu;
  if (n.op == &ops::gelu && static_cast<const ops::GeluAttrs&>(*n.attrs).tanh_approximation)
    return GemmActivation::GeluTanh;
  return std::nullopt;
}

// How a group's region is an epilogue of its input `product`: `[add(product, bias)] [act]`,
// with nothing else in it.
struct EpilogueMatch {
  int bias_input = -1;  // the region input that is the bias; -1: none
  GemmActivation activation = GemmActivation::None;
};

std::optional<EpilogueMatch> match_epilogue(const ir::Graph& region, const ir::Value* product) {
  const auto& nodes = region.nodes();
  if (nodes.empty() || nodes.size() > 2 || region.outputs().size() != 1) return std::nullopt;
  EpilogueMatch match;
  const ir::Value* current = product;
  size_t next = 0;
  if (nodes[0]->op == &ops::add) {
    const ir::Node& add = *nodes[0];
    const ir::Value* bias = add.inputs[0] == product   ? add.inputs[1]
                            : add.inputs[1] == product ? add.inputs[0]
                                                       : nullptr;
    if (!bias || bias == product || bias->producer) return std::nullopt;
    for (size_t i = 0; i < region.inputs().size(); ++i)
      if (region.inputs()[i].value == bias) match.bias_input = static_cast<int>(i);
    current = add.outputs[0];
    next = 1;
  }
  if (next < nodes.size()) {
    std::optional<GemmActivation> act = activation_of(*nodes[next]);
    if (!act || nodes[next]->inputs[0] != current) return std::nullopt;
    match.activation = *act;
    current = nodes[next]->outputs[0];
    ++next;
  }
  if (next != nodes.size() || region.outputs()[0].value != current) return std::nullopt;
  if (match.bias_input < 0 && match.activation == GemmActivation::None) return std::nullopt;
  return match;
}

// The "gemm" group computing `group`'s epilogue (match, reading its input `product_index`)
// of `mm`'s product.
std::unique_ptr<ir::Node> make_gemm_group(ir::Graph& graph, const ir::Node& mm,
                                          const ir::Node& group, size_t product_index,
                                          const EpilogueMatch& match) {
  const ir::Graph& region = *group.regions.at(0);
  const ir::Type& product_type = mm.outputs[0]->type;
  std::vector<ir::Value*> inputs{mm.inputs[0], mm.inputs[1]};
  if (match.bias_input >= 0) inputs.push_back(group.inputs[static_cast<size_t>(match.bias_input)]);
  ops::FusedAttrs attrs;
  attrs.kind = "gemm";
  std::unique_ptr<ir::Node> gemm = graph.make_node(ops::fused, attrs, inputs, {product_type});
  gemm->module_path = mm.module_path;
  gemm->loc = mm.loc;
  ir::Graph* body = graph.add_region(gemm.get());
  std::vector<ir::Value*> inner;
  for (const ir::Value* v : inputs) inner.push_back(body->add_input(ir::InputKind::Input, "", v->type));
  ir::Node* product = body->add_node(ops::matmul, *mm.attrs, {inner[0], inner[1]}, {product_type});
  product->module_path = mm.module_path;
  product->loc = mm.loc;
  std::unordered_map<const ir::Value*, ir::Value*> renamed{
      {region.inputs()[product_index].value, product->outputs[0]}};
  if (match.bias_input >= 0)
    renamed[region.inputs()[static_cast<size_t>(match.bias_input)].value] = inner[2];
  for (const auto& n : region.nodes()) {
    std::vector<ir::Value*> args;
    for (const ir::Value* v : n->inputs) args.push_back(renamed.at(v));
    std::vector<ir::Type> types;
    for (const ir::Value* v : n->outputs) types.push_back(v->type);
    ir::Node* copy = body->add_node(*n->op, *n->attrs, std::move(args), types);
    copy->module_path = n->module_path;
    copy->loc = n->loc;
    for (size_t j = 0; j < n->outputs.size(); ++j) renamed[n->outputs[j]] = copy->outputs[j];
  }
  body->add_output(renamed.at(region.outputs()[0].value));
  return gemm;
}

}  // namespace

std::optional<GemmGroup> gemm_group(const ir::Node& node) {
  if (!is_group_of_kind(node, "gemm")) return std::nullopt;
  GemmGroup out;
  out.bias = node.inputs.size() == 3;
  if (std::optional<GemmActivation> act = activation_of(*node.regions.at(0)->nodes().back()))
    out.activation = *act;
  return out;
}

int fuse_gemm_epilogues(ir::Graph& graph) {
  std::unordered_map<const ir::Value*, int> uses;
  for (const auto& node : graph.nodes())
    for (const ir::Value* v : node->inputs)
      if (v) ++uses[v];
  for (const ir::GraphOutput& out : graph.outputs()) ++uses[out.value];

  std::unordered_set<const ir::Node*> replaced;
  std::vector<std::pair<const ir::Node*, std::unique_ptr<ir::Node>>> made;  // before which node
  for (const auto& node : graph.nodes()) {
    const ir::Node& group = *node;
    if (!is_group_of_kind(group, "elementwise") || group.outputs.size() != 1) continue;
    for (size_t p = 0; p < group.inputs.size(); ++p) {
      const ir::Value* product = group.inputs[p];
      const ir::Node* mm = product ? product->producer : nullptr;
      if (!mm || mm->op != &ops::matmul || uses[product] != 1 || replaced.count(mm)) continue;
      const ir::Type& t = product->type;
      // float32 only: cuBLASLt's epilogues are documented and tested for it; float64 GEMMs
      // keep their epilogue as a kernel.
      if (t.shape.size() != 2 || !t.device.is_cuda() || t.dtype != DType::Float32 ||
          !(group.outputs[0]->type == t) || mm->inputs[0]->type.shape.size() != 2 ||
          mm->inputs[1]->type.shape.size() != 2)
        continue;
      std::optional<EpilogueMatch> match =
          match_epilogue(*group.regions.at(0), group.regions.at(0)->inputs()[p].value);
      if (!match) continue;
      if (match->bias_input >= 0) {
        const ir::Type& b = group.inputs[static_cast<size_t>(match->bias_input)]->type;
        if (b.shape.size() != 1 || b.shape[0] != t.shape[1] || b.dtype != t.dtype ||
            b.device != t.device)
          continue;
      }
      made.emplace_back(&group, make_gemm_group(graph, *mm, group, p, *match));
      replaced.insert(mm);
      replaced.insert(&group);
      break;
    }
  }
  // Each gemm group takes its epilogue group's place: every input is defined before it. The
  // uses are rewired once all are in the graph (one gemm group may read another's result).
  auto& nodes = graph.mutable_nodes();
  std::vector<std::pair<const ir::Value*, ir::Value*>> rewired;
  for (auto& [group, gemm] : made) {
    rewired.emplace_back(group->outputs[0], gemm->outputs[0]);
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].get() == group) {
        nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(i), std::move(gemm));
        break;
      }
  }
  for (const auto& [from, to] : rewired) graph.replace_uses(from, to);
  graph.erase_nodes_if([&](const ir::Node& n) { return replaced.count(&n) > 0; });
  return static_cast<int>(made.size());
}

}  // namespace kiln::cuda::exec
