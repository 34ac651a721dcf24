// Deep copies of graphs: passes rewrite a copy, so the traced graph stays as recorded (for
// explain and for other backends).
#include <unordered_map>

#include "kiln/ir/graph.h"

namespace kiln::ir {
namespace {

// Copies `from` into the empty `to`, keeping value ids; `outer` maps values of enclosing
// graphs (regions are isolated, so it is only consulted for robustness).
void copy_into(const Graph& from, Graph& to) {
  std::unordered_map<const Value*, Value*> map;
  for (const GraphInput& in : from.inputs()) {
    Value* v = to.make_value(in.value->type, in.value->id);
    to.mutable_inputs().push_back({in.kind, in.name, v, in.constant});
    map[in.value] = v;
  }
  for (const auto& node : from.nodes()) {
    auto copy = std::make_unique<Node>();
    copy->op = node->op;
    copy->attrs = node->attrs->clone();
    for (const Value* v : node->inputs) copy->inputs.push_back(v ? map.at(v) : nullptr);
    for (const Value* v : node->outputs) {
      Value* out = to.make_value(v->type, v->id);
      copy->outputs.push_back(out);
      map[v] = out;
    }
    copy->module_path = node->module_path;
    copy->loc = node->loc;
    Node* placed = to.append_node(std::move(copy));
    for (const auto& region : node->regions) copy_into(*region, *to.add_region(placed));
  }
  for (const GraphOutput& o : from.outputs())
    to.add_output(o.value ? map.at(o.value) : nullptr, o.name);
}

}  // namespace

std::unique_ptr<Graph> clone_graph(const Graph& g) {
  auto copy = std::make_unique<Graph>(g.name());
  copy_into(g, *copy);
  copy->mutable_size_bounds() = g.size_bounds();
  return copy;
}

}  // namespace kiln::ir
