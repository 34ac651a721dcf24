// Graphviz export: ops as boxes labelled with their output types, graph inputs by kind,
// one nested cluster per module path, regions as dashed clusters, highlighted nodes red.
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "text_form.h"

namespace kiln::ir {

namespace {

// A DOT string literal whose "\n" sequences (written by `lines`) break label lines.
std::string dot_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + '"';
}

const char* input_shape(InputKind k) {
  switch (k) {
    case InputKind::Input:
      return "ellipse";
    case InputKind::Parameter:
      return "box3d";
    case InputKind::Buffer:
      return "cylinder";
    case InputKind::Constant:
      return "note";
  }
  return "ellipse";
}

// The module-path tree: "blocks.0.up" sits in "blocks.0", which sits in "blocks".
struct ModuleCluster {
  std::string path;
  std::vector<const Node*> nodes;
  std::vector<std::unique_ptr<ModuleCluster>> children;  // in order of first appearance

  ModuleCluster& child(const std::string& child_path) {
    for (auto& c : children)
      if (c->path == child_path) return *c;
    children.push_back(std::make_unique<ModuleCluster>());
    children.back()->path = child_path;
    return *children.back();
  }
};

class DotWriter {
 public:
  explicit DotWriter(const DotOptions& options)
      : options_(options), highlighted_(options.highlighted.begin(), options.highlighted.end()) {}

  std::string write(const Graph& g) {
    os_ << "digraph " << dot_quote(g.name()) << " {\n";
    os_ << "  node [shape=box, fontname=\"monospace\"];\n";
    graph(g, 1, options_.cluster_modules);
    os_ << edges_.str() << "}\n";
    return os_.str();
  }

 private:
  void indent(int depth) { os_ << std::string(static_cast<size_t>(2 * depth), ' '); }

  void graph(const Graph& g, int depth, bool cluster_modules) {
    for (const GraphInput& in : g.inputs()) {
      if (!in.value) continue;
      std::string id = "v" + std::to_string(in.value->id);
      sources_[in.value] = id;
      indent(depth);
      os_ << id << " [shape=" << input_shape(in.kind) << ", label="
          << dot_quote(std::string(input_kind_name(in.kind)) + " " + in.name + "\n%" +
                       std::to_string(in.value->id) + ": " + type_str(in.value->type))
          << "];\n";
    }
    ModuleCluster root;
    for (const auto& n : g.nodes()) {
      ModuleCluster* c = &root;
      if (cluster_modules && !n->module_path.empty()) {
        for (size_t dot = 0; dot != std::string::npos;) {
          dot = n->module_path.find('.', dot + 1);
          c = &c->child(n->module_path.substr(0, dot));
        }
      }
      c->nodes.push_back(n.get());
    }
    cluster(root, depth);
    for (const auto& n : g.nodes()) node_edges(*n);
    std::string out_id = "out" + std::to_string(next_id_++);
    indent(depth);
    os_ << out_id << " [shape=doubleoctagon, label=\"" << (g.parent() ? "yield" : "return")
        << "\"];\n";
    for (const GraphOutput& out : g.outputs()) {
      auto it = sources_.find(out.value);
      if (it == sources_.end()) continue;
      edges_ << "  " << it->second << " -> " << out_id;
      if (!out.name.empty()) edges_ << " [label=" << dot_quote(out.name) << "]";
      edges_ << ";\n";
    }
    last_output_id_ = out_id;
  }

  void cluster(const ModuleCluster& c, int depth) {
    if (!c.path.empty()) {
      indent(depth);
      os_ << "subgraph cluster_" << next_id_++ << " {\n";
      indent(depth + 1);
      os_ << "label=" << dot_quote(c.path) << ";\n";
      ++depth;
    }
    for (const Node* n : c.nodes) node(*n, depth);
    for (const auto& child : c.children) cluster(*child, depth);
    if (!c.path.empty()) {
      indent(depth - 1);
      os_ << "}\n";
    }
  }

  void node(const Node& n, int depth) {
    std::string id = "n" + std::to_string(next_id_++);
    node_ids_[&n] = id;
    std::string label = n.op ? n.op->name : "<no op>";
    std::string host = label;  // "cond %8", for the region clusters
    if (!n.outputs.empty() && n.outputs[0]) host += " %" + std::to_string(n.outputs[0]->id);
    for (const Value* v : n.outputs) {
      if (!v) continue;
      label += "\n%" + std::to_string(v->id) + ": " + type_str(v->type);
      sources_[v] = id;
    }
    indent(depth);
    os_ << id << " [label=" << dot_quote(label);
    if (highlighted_.count(&n)) os_ << ", color=red, fontcolor=red, penwidth=2";
    os_ << "];\n";
    for (size_t i = 0; i < n.regions.size(); ++i) {
      indent(depth);
      os_ << "subgraph cluster_" << next_id_++ << " {\n";
      indent(depth + 1);
      os_ << "label=" << dot_quote("region " + std::to_string(i) + " of " + host) << ";\n";
      indent(depth + 1);
      os_ << "style=dashed;\n";
      graph(*n.regions[i], depth + 1, false);
      indent(depth);
      os_ << "}\n";
      edges_ << "  " << last_output_id_ << " -> " << id << " [style=dashed];\n";
    }
  }

  void node_edges(const Node& n) {
    for (const Value* v : n.inputs) {
      auto it = sources_.find(v);
      if (!v || it == sources_.end()) continue;
      edges_ << "  " << it->second << " -> " << node_ids_[&n] << ";\n";
    }
  }

  const DotOptions& options_;
  std::unordered_set<const Node*> highlighted_;
  std::ostringstream os_, edges_;  // edges go last, after every node is declared
  std::unordered_map<const Value*, std::string> sources_;  // value -> the DOT node defining it
  std::unordered_map<const Node*, std::string> node_ids_;
  std::string last_output_id_;  // the return/yield node of the graph drawn last
  int next_id_ = 0;
};

}  // namespace

std::string to_dot(const Graph& g, const DotOptions& options) {
  return DotWriter(options).write(g);
}

}  // namespace kiln::ir
