// The graph IR: a typed SSA graph of op-table nodes, recorded by the tracer and read by
// backends and passes.
//
// A Graph owns its values and nodes. Values are typed (dtype, shape with possibly symbolic
// dims, device) and defined exactly once: by a graph input or by a node output. Nodes refer
// to their OpDef (the same table eager dispatch uses) and own a copy of its typed
// attributes. A control-flow node owns regions: nested graphs that take their values only
// through their own inputs (isolated from above) and end with their outputs.
//
// Every node carries the dotted module path it was recorded in (`blocks.2.body.0`) and the
// user's source location, which the diagnostics quote.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/location.h"
#include "kiln/op.h"

namespace kiln::ir {

class Graph;
struct Node;

// A value's type. Dims may be symbolic (symbols.h).
struct Type {
  DType dtype = DType::Float32;
  Shape shape;
  Device device;
  bool operator==(const Type& other) const {
    return dtype == other.dtype && shape == other.shape && device == other.device;
  }
  static Type of(const TensorType& t) { return {t.dtype, t.shape, t.device}; }
  static Type of(const Tensor& t) { return {t.dtype(), Shape(t.impl()->sizes), t.device()}; }
};
// "float32[s0, 784]"; a cpu device is not printed, any other is: "float32[2]@cuda:0".
std::string type_str(const Type& t);

struct Value {
  int id = 0;              // unique within the outermost graph; printed as %id
  Type type;
  Node* producer = nullptr;  // null for a graph or region input
  int output_index = 0;      // which output of the producer
};

// What a graph input stands for. Parameters and buffers are named by their dotted path
// and read from the live module on each call; constants are tensors the graph holds.
enum class InputKind : uint8_t { Input, Parameter, Buffer, Constant };
const char* input_kind_name(InputKind k);  // "input", "param", "buffer", "const"

struct GraphInput {
  InputKind kind = InputKind::Input;
  std::string name;  // user input name ("x", "input0"), dotted path, or constant label
  Value* value = nullptr;
  // The data of a Constant input: contiguous, on its value's device or on the CPU (an
  // executor for a GPU places it there before running).
  Tensor constant;
};

struct GraphOutput {
  Value* value = nullptr;
  std::string name;  // "" for a plain result; buffers written back use "buffer:<path>"
};

// A symbolic size the graph is exact for only up to a bound. Slicing a static dim by a
// symbolic end (`pos[:, :x.size(1)]` with 512 positions) gives a dim of s0 while s0 <= 512;
// beyond that eager clamps and the graph would read past the dim. Executors refuse calls
// that break a bound (check_input_types); kiln::compile retraces for them.
struct SizeBound {
  int64_t size = 0;  // symbolic (s0, s0*2)
  int64_t max = 0;   // the largest value the size may take
  // The op that set it, where: like a node's (the location resolves only when read).
  std::string op;
  std::string module_path;
  Location loc;
  // "slice at model.cpp:12 (Net::forward) in module 'embed'"
  std::string where() const;
};

struct Node {
  const OpDef* op = nullptr;
  std::unique_ptr<Attrs> attrs;
  std::vector<Value*> inputs;  // null where the op's optional input was absent (no bias)
  std::vector<Value*> outputs;
  std::vector<std::unique_ptr<Graph>> regions;  // control flow only
  std::string module_path;                      // "" for the root module
  Location loc;
};

class Graph {
 public:
  // A top-level graph; `name` is usually the traced module's type name.
  explicit Graph(std::string name = "graph");
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // ---- building ----
  Value* add_input(InputKind kind, std::string name, Type type, Tensor constant = Tensor());
  // Appends a node with one output per entry of `output_types`. Attributes are cloned.
  Node* add_node(const OpDef& op, const Attrs& attrs, std::vector<Value*> inputs,
                 const std::vector<Type>& output_types);
  void add_output(Value* value, std::string name = "");
  // A region owned by `node`; its values are numbered from this graph's counter.
  Graph* add_region(Node* node);
  // Records that `bound.size` must stay <= bound.max (the tightest bound per size is kept).
  // Bounds belong to the top-level graph, whose inputs bind the symbols.
  void add_size_bound(SizeBound bound);

  // ---- rewriting (passes) ----
  // A node with fresh output values that is not yet in the graph: insert it into
  // mutable_nodes() where it belongs (its inputs must be defined before it).
  std::unique_ptr<Node> make_node(const OpDef& op, const Attrs& attrs, std::vector<Value*> inputs,
                                  const std::vector<Type>& output_types);
  // Every use of `from` in this graph's nodes and outputs now reads `to` (regions are
  // isolated, so they hold no uses). Both must have the same type.
  void replace_uses(const Value* from, Value* to);
  // Removes the nodes for which `dead` returns true; their outputs must be unused.
  void erase_nodes_if(const std::function<bool(const Node&)>& dead);
  std::vector<std::unique_ptr<Node>>& mutable_nodes() { return nodes_; }

  // ---- reading ----
  const std::vector<GraphInput>& inputs() const { return inputs_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  const std::vector<SizeBound>& size_bounds() const { return size_bounds_; }
  std::vector<SizeBound>& mutable_size_bounds() { return size_bounds_; }
  std::vector<GraphInput>& mutable_inputs() { return inputs_; }
  std::vector<GraphOutput>& mutable_outputs() { return outputs_; }
  Graph* parent() const { return parent_; }  // null for a top-level graph
  // Number of nodes here and in all regions below.
  size_t node_count() const;
  // Fresh value id from the outermost graph's counter (the parser uses explicit ids).
  int next_value_id();
  // Creates a value with an explicit id (the parser); ids must stay unique.
  Value* make_value(Type type, int id);
  // Appends a node whose outputs already exist (the parser).
  Node* append_node(std::unique_ptr<Node> node);

 private:
  std::string name_;
  Graph* parent_ = nullptr;
  int next_id_ = 0;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<GraphInput> inputs_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<GraphOutput> outputs_;
  std::vector<SizeBound> size_bounds_;
};

// ---- text form (print.cpp / parse.cpp) ----
// Prints a graph so that parse_graph(print_graph(g)) prints identically. See
// docs/compile.md for the grammar.
std::string print_graph(const Graph& g);
// Parses the text form. Ops are looked up in the op table; errors name the line and column.
std::unique_ptr<Graph> parse_graph(std::string_view text);

// A deep copy with the same value ids, attributes, constants, paths and locations.
std::unique_ptr<Graph> clone_graph(const Graph& g);

// ---- checks and identity ----
// Checks the invariants every pass must keep: each value defined once before use (regions
// see only their own inputs), node input/output counts match the op, attributes are the
// op's type, output types equal what the op's infer computes from the input types, graph
// inputs are named uniquely. Throws kiln::Error naming the node (op, module path,
// location) and what is wrong.
void verify(const Graph& g);

// A tensor with v's type and no storage, for running an op's infer on the types of a graph
// (undefined for a null value).
Tensor placeholder(const Value* v);
// A hash of the structure: ops, attributes, wiring, types, input kinds and names, outputs;
// not value ids, module paths or locations. Equal graphs hash equally across processes.
uint64_t structural_hash(const Graph& g);

// ---- Graphviz ----
struct DotOptions {
  bool cluster_modules = true;             // one cluster per module path
  std::vector<const Node*> highlighted{};  // drawn red (graph breaks, failing nodes)
};
std::string to_dot(const Graph& g, const DotOptions& options = {});

}  // namespace kiln::ir
