// Building and reading graphs: values, nodes, regions, and the small printers for types,
// locations and input kinds.
#include "kiln/ir/graph.h"

#include <algorithm>

#include "kiln/error.h"
#include "kiln/ir/symbols.h"

namespace kiln::ir {

std::string type_str(const Type& t) {
  std::string out(dtype_name(t.dtype));
  out += '[';
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += format_size(t.shape[i]);
  }
  out += ']';
  if (!t.device.is_cpu()) out += '@' + t.device.str();
  return out;
}

const char* input_kind_name(InputKind k) {
  switch (k) {
    case InputKind::Input:
      return "input";
    case InputKind::Parameter:
      return "param";
    case InputKind::Buffer:
      return "buffer";
    case InputKind::Constant:
      return "const";
  }
  return "?";
}

Graph::Graph(std::string name) : name_(std::move(name)) {}
Graph::~Graph() = default;

Value* Graph::add_input(InputKind kind, std::string name, Type type, Tensor constant) {
  Value* v = make_value(std::move(type), next_value_id());
  inputs_.push_back({kind, std::move(name), v, std::move(constant)});
  return v;
}

Node* Graph::add_node(const OpDef& op, const Attrs& attrs, std::vector<Value*> inputs,
                      const std::vector<Type>& output_types) {
  return append_node(make_node(op, attrs, std::move(inputs), output_types));
}

std::unique_ptr<Node> Graph::make_node(const OpDef& op, const Attrs& attrs,
                                       std::vector<Value*> inputs,
                                       const std::vector<Type>& output_types) {
  auto node = std::make_unique<Node>();
  node->op = &op;
  node->attrs = attrs.clone();
  node->inputs = std::move(inputs);
  for (size_t i = 0; i < output_types.size(); ++i) {
    Value* v = make_value(output_types[i], next_value_id());
    v->producer = node.get();
    v->output_index = static_cast<int>(i);
    node->outputs.push_back(v);
  }
  return node;
}

void Graph::replace_uses(const Value* from, Value* to) {
  KILN_CHECK(from->type == to->type, "[ir] replace_uses expected values of one type, got %",
             from->id, ": ", type_str(from->type), " and %", to->id, ": ", type_str(to->type), ".");
  for (const auto& node : nodes_)
    for (Value*& v : node->inputs)
      if (v == from) v = to;
  for (GraphOutput& o : outputs_)
    if (o.value == from) o.value = to;
}

void Graph::erase_nodes_if(const std::function<bool(const Node&)>& dead) {
  std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) { return dead(*n); });
}

void Graph::add_output(Value* value, std::string name) {
  outputs_.push_back({value, std::move(name)});
}

Graph* Graph::add_region(Node* node) {
  auto region = std::make_unique<Graph>("region");
  region->parent_ = this;
  node->regions.push_back(std::move(region));
  return node->regions.back().get();
}

std::string SizeBound::where() const {
  std::string out = op.empty() ? "an op" : op;
  if (loc.known()) out += " at " + location_str(loc);
  return out + (module_path.empty() ? " in the root module" : " in module '" + module_path + "'");
}

void Graph::add_size_bound(SizeBound bound) {
  for (SizeBound& b : size_bounds_) {
    if (b.size != bound.size) continue;
    if (bound.max < b.max) b = std::move(bound);
    return;
  }
  size_bounds_.push_back(std::move(bound));
}

size_t Graph::node_count() const {
  size_t n = nodes_.size();
  for (const auto& node : nodes_)
    for (const auto& region : node->regions) n += region->node_count();
  return n;
}

int Graph::next_value_id() {
  Graph* root = this;
  while (root->parent_) root = root->parent_;
  return root->next_id_++;
}

Value* Graph::make_value(Type type, int id) {
  // Keep the outermost counter past every explicit id, so values added after parsing
  // never reuse one.
  Graph* root = this;
  while (root->parent_) root = root->parent_;
  root->next_id_ = std::max(root->next_id_, id + 1);
  auto v = std::make_unique<Value>();
  v->id = id;
  v->type = std::move(type);
  values_.push_back(std::move(v));
  return values_.back().get();
}

Node* Graph::append_node(std::unique_ptr<Node> node) {
  for (size_t i = 0; i < node->outputs.size(); ++i) {
    node->outputs[i]->producer = node.get();
    node->outputs[i]->output_index = static_cast<int>(i);
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

}  // namespace kiln::ir
