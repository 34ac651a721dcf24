// The verifier: the invariants every graph keeps between passes (definitions before uses,
// isolated regions, op arity and attribute types, output types equal to the op's infer).
#include <cxxabi.h>

#include <cstdlib>
#include <ostream>
#include <typeinfo>
#include <unordered_set>

#include "kiln/dispatch.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/control_flow.h"

namespace kiln::ir {

Tensor placeholder(const Value* v) {
  if (!v) return Tensor();
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = v->type.shape;
  impl->strides = contiguous_strides(v->type.shape);
  impl->dtype = v->type.dtype;
  impl->device = v->type.device;
  impl->symbolic = std::make_shared<SymbolicInfo>();
  return Tensor(std::move(impl));
}

namespace {

std::string value_str(const Value* v) {
  return v ? '%' + std::to_string(v->id) : "%<null>";
}

std::string type_name(const std::type_info& t) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string out = status == 0 ? demangled : t.name();
  std::free(demangled);
  return out;
}

// "add %5 in module 'fc1' at model.cpp:12 (MyNet::forward)": what an error names.
std::string node_str(const Node& n) {
  std::string out = n.op ? n.op->name : "<no op>";
  for (size_t i = 0; i < n.outputs.size(); ++i)
    out += (i == 0 ? " " : ", ") + value_str(n.outputs[i]);
  out += n.module_path.empty() ? " in the root module" : " in module '" + n.module_path + "'";
  if (n.loc.known()) out += " at " + location_str(n.loc);
  return out;
}

// Error prefixes, printed only when an error is reported: naming a node reads its source
// location, which may first need the debug line tables (kiln/ir/location.h).
struct Context {  // where a graph sits: at the top (no node), or in region `region` of `node`
  const Context* outer = nullptr;
  const Node* node = nullptr;
  size_t region = 0;
};
std::ostream& operator<<(std::ostream& os, const Context& c) {
  if (c.node) os << *c.outer << "region " << c.region << " of " << node_str(*c.node) << ": ";
  return os;
}
// "[ir verify] <context><node>: ", or "[ir verify] <context>graph input 'x': ".
struct Where {
  const Context* context = nullptr;
  const Node* node = nullptr;
  const std::string* input_name = nullptr;
};
std::ostream& operator<<(std::ostream& os, const Where& w) {
  os << "[ir verify] " << *w.context;
  if (w.node) return os << node_str(*w.node) << ": ";
  return os << "graph input '" << *w.input_name << "': ";
}

std::string types_str(const std::vector<Value*>& values) {
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i == 0 ? "" : ", ") + (values[i] ? type_str(values[i]->type) : std::string("_"));
  return out + ")";
}

std::vector<Type> types_of(const std::vector<Value*>& values, size_t from, size_t to) {
  std::vector<Type> out;
  for (size_t i = from; i < to && i < values.size(); ++i)
    out.push_back(values[i] ? values[i]->type : Type{});
  return out;
}
std::vector<Type> input_types(const Graph& g) {
  std::vector<Type> out;
  for (const GraphInput& in : g.inputs()) out.push_back(in.value->type);
  return out;
}
std::vector<Type> output_types(const Graph& g) {
  std::vector<Type> out;
  for (const GraphOutput& o : g.outputs()) out.push_back(o.value ? o.value->type : Type{});
  return out;
}

void expect_types(const std::vector<Type>& want, const std::vector<Type>& got,
                  const Where& where, const char* what) {
  KILN_CHECK(want.size() == got.size(), where, what, ": expected ", want.size(), " values, found ",
             got.size(), ".");
  for (size_t i = 0; i < want.size(); ++i)
    KILN_CHECK(want[i] == got[i], where, what, " ", i, ": expected ", type_str(want[i]), ", found ",
               type_str(got[i]), ".");
}

std::vector<Type> concat(std::vector<Type> a, const std::vector<Type>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Control-flow nodes: their regions' signatures against the node's operands and results
// (layouts in kiln/ops/control_flow.h).
void check_region_signature(const Node& n, const Where& where) {
  const OpDef* op = n.op;
  size_t want_regions = op == &ops::cond || op == &ops::while_loop ? 2 : 1;
  KILN_CHECK(n.regions.size() == want_regions, where, op->name, " expects ", want_regions,
             " region(s), found ", n.regions.size(), ".");
  std::vector<Type> ins = types_of(n.inputs, 0, n.inputs.size());
  std::vector<Type> outs = types_of(n.outputs, 0, n.outputs.size());
  if (op == &ops::cond) {
    KILN_CHECK(!ins.empty() && numel(ins[0].shape) == 1, where,
               "the predicate must have one element.");
    std::vector<Type> operands(ins.begin() + 1, ins.end());
    for (const auto& r : n.regions) {
      expect_types(operands, input_types(*r), where, "branch input");
      expect_types(outs, output_types(*r), where, "branch result");
    }
  } else if (op == &ops::while_loop) {
    size_t nc = static_cast<size_t>(static_cast<const ops::WhileLoopAttrs&>(*n.attrs).num_carry);
    std::vector<Type> carry(ins.begin(),
                            ins.begin() + static_cast<std::ptrdiff_t>(std::min(nc, ins.size())));
    for (const auto& r : n.regions) expect_types(ins, input_types(*r), where, "loop region input");
    std::vector<Type> c = output_types(*n.regions[0]);
    KILN_CHECK(c.size() == 1 && numel(c[0].shape) == 1, where,
               "the loop condition region must return one one-element tensor.");
    expect_types(carry, output_types(*n.regions[1]), where, "loop body result");
    expect_types(carry, outs, where, "loop result");
  } else if (op == &ops::fori_loop) {
    size_t nc = static_cast<size_t>(static_cast<const ops::ForiLoopAttrs&>(*n.attrs).num_carry);
    std::vector<Type> carry(ins.begin(),
                            ins.begin() + static_cast<std::ptrdiff_t>(std::min(nc, ins.size())));
    expect_types(concat({Type{DType::Int64, {}, kCPU}}, ins), input_types(*n.regions[0]), where,
                 "loop body input");
    expect_types(carry, output_types(*n.regions[0]), where, "loop body result");
    expect_types(carry, outs, where, "loop result");
  } else if (op == &ops::scan) {
    const auto& a = static_cast<const ops::ScanAttrs&>(*n.attrs);
    size_t nc = static_cast<size_t>(a.num_carry), nx = static_cast<size_t>(a.num_xs);
    KILN_CHECK(nc + nx <= ins.size(), where, "scan has fewer operands than num_carry + num_xs.");
    std::vector<Type> body_in(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(nc));
    for (size_t j = nc; j < nc + nx; ++j) {
      Type slice = ins[j];
      KILN_CHECK(!slice.shape.empty() && slice.shape[0] == a.length, where, "scan input ", j,
                 " must have length ", a.length, " in dim 0.");
      slice.shape.erase(slice.shape.begin());
      body_in.push_back(slice);
    }
    body_in.insert(body_in.end(), ins.begin() + static_cast<std::ptrdiff_t>(nc + nx), ins.end());
    expect_types(body_in, input_types(*n.regions[0]), where, "scan body input");
    std::vector<Type> body_out = output_types(*n.regions[0]);
    std::vector<Type> want = body_out;
    for (size_t k = nc; k < want.size(); ++k) want[k].shape.insert(want[k].shape.begin(), a.length);
    expect_types(want, outs, where, "scan result");
  }
}

// A fusion group's one region takes the node's operands and returns its results.
void check_fused_signature(const Node& n, const Where& where) {
  KILN_CHECK(n.regions.size() == 1, where, n.op->name, " expects 1 region, found ",
             n.regions.size(), ".");
  expect_types(types_of(n.inputs, 0, n.inputs.size()), input_types(*n.regions[0]), where,
               "fused region input");
  expect_types(types_of(n.outputs, 0, n.outputs.size()), output_types(*n.regions[0]), where,
               "fused region result");
}

class Verifier {
 public:
  void graph(const Graph& g, const Context& context) {
    scopes_.emplace_back();
    std::unordered_set<std::string_view> names;
    for (const GraphInput& in : g.inputs()) {
      KILN_CHECK(in.value, "[ir verify] ", context, "the graph input '", in.name,
                 "' has no value. Fix: create inputs with Graph::add_input.");
      KILN_CHECK(in.name.empty() || names.insert(in.name).second, "[ir verify] ", context,
                 "two graph inputs are named '", in.name,
                 "'. Fix: give every input, parameter, buffer and constant its own name.");
      // A constant's data may stay on the host while its type names a GPU: the executor
      // places it there before running (a graph compiled for a GPU needs none to compile).
      Type held = in.constant.defined() ? Type::of(in.constant) : Type{};
      if (held.device.is_cpu()) held.device = in.value->type.device;
      if (in.kind == InputKind::Constant && in.constant.defined())
        KILN_CHECK(held == in.value->type, "[ir verify] ", context, "constant '",
                   in.name, "' ", value_str(in.value), " holds a ", in.constant.type_str(),
                   " tensor but its value has type ", type_str(in.value->type),
                   ". Fix: give the value the constant's type.");
      define(in.value, Where{&context, nullptr, &in.name});
    }
    for (const auto& n : g.nodes()) node(*n, context);
    const char* ret = g.parent() ? "yield" : "return";
    for (const GraphOutput& out : g.outputs()) {
      KILN_CHECK(out.value, "[ir verify] ", context, ret,
                 " has a null value. Fix: return values of this graph.");
      KILN_CHECK(scopes_.back().count(out.value), "[ir verify] ", context, ret, " uses ",
                 value_str(out.value), ", which is not defined in this ",
                 g.parent() ? "region" : "graph",
                 ". Fix: return a value defined by an input or a node of this graph.");
    }
    scopes_.pop_back();
  }

 private:
  void node(const Node& n, const Context& context) {
    const Where where{&context, &n};
    KILN_CHECK(n.op, where, "the node has no op. Fix: create nodes with Graph::add_node.");
    const OpDef& op = *n.op;
    KILN_CHECK(n.attrs, where, "the node has no attributes; expected ",
               type_name(typeid(*op.attrs_prototype)), ". Fix: pass the op's attribute struct.");
    KILN_CHECK(typeid(*n.attrs) == typeid(*op.attrs_prototype), where,
               "expected attributes of type ", type_name(typeid(*op.attrs_prototype)),
               " (the op's attrs_prototype), found ", type_name(typeid(*n.attrs)),
               ". Fix: pass the attribute struct the op declares.");
    size_t expected = op.input_names.size();
    if (op.variadic()) {
      KILN_CHECK(n.inputs.size() >= expected - 1, where, "expected at least ", expected - 1,
                 " input(s), found ", n.inputs.size(), ".");
    } else {
      KILN_CHECK(n.inputs.size() == expected, where, "expected ", expected, " inputs (",
                 input_list(op), "), found ", n.inputs.size(),
                 ". Fix: pass one entry per input, null for an absent optional input.");
    }
    for (const Value* v : n.inputs) {
      if (v) check_visible(v, where);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      KILN_CHECK(v, where, "output ", i, " is null. Fix: create outputs with Graph::add_node.");
      KILN_CHECK(v->producer == &n && v->output_index == static_cast<int>(i), where, "output ", i,
                 " (", value_str(v), ") does not record this node as its producer (output ", i,
                 "). Fix: create outputs with Graph::add_node or Graph::append_node.");
      define(v, where);
    }
    for (size_t i = 0; i < n.regions.size(); ++i)
      graph(*n.regions[i], Context{&context, &n, i});
    if (op.lowering == LoweringClass::ControlFlow) {
      check_region_signature(n, where);
      return;
    }
    if (op.lowering == LoweringClass::Fused) {
      check_fused_signature(n, where);
      return;
    }
    KILN_CHECK(n.regions.empty(), where, "the node has ", n.regions.size(), " region(s) but ",
               op.name,
               " is neither a control-flow op nor a fusion group. Fix: only those own regions.");
    check_infer(n, where);
  }

  static std::string input_list(const OpDef& op) {
    std::string out;
    for (size_t i = 0; i < op.input_names.size(); ++i)
      out += (i == 0 ? "" : ", ") + op.input_names[i];
    return out;
  }

  // `where`: the error prefix naming the definition.
  void define(const Value* v, const Where& where) {
    KILN_CHECK(defined_.insert(v).second, where, "value ", value_str(v),
               " is defined twice. Fix: create a fresh value per definition.");
    scopes_.back().insert(v);
  }

  void check_visible(const Value* v, const Where& where) {
    if (scopes_.back().count(v)) return;
    for (size_t i = 0; i + 1 < scopes_.size(); ++i) {
      KILN_CHECK(!scopes_[i].count(v), where, "uses ", value_str(v),
                 ", which is defined outside its region; a region may use only its own inputs "
                 "and the values defined inside it. Fix: pass the value in as a region input.");
    }
    KILN_FAIL(where, "uses ", value_str(v),
              " before its definition (or a value of another graph). Fix: order nodes so that "
              "every value is defined before it is used.");
  }

  static void check_infer(const Node& n, const Where& where) {
    SmallVector<Tensor, 4> inputs;
    for (const Value* v : n.inputs) inputs.push_back(placeholder(v));
    TensorTypes inferred;
    try {
      inferred = infer_types(*n.op, TensorSpan(inputs.data(), inputs.size()), *n.attrs);
    } catch (const Error& e) {
      KILN_FAIL(where, "the op rejects the input types ", types_str(n.inputs), ": ", e.what());
    }
    KILN_CHECK(inferred.size() == n.outputs.size(), where, "the node has ", n.outputs.size(),
               " outputs but ", n.op->name, " infers ", inferred.size(), " from ",
               types_str(n.inputs), ". Fix: create one output per inferred type.");
    for (size_t i = 0; i < inferred.size(); ++i) {
      Type expected = Type::of(inferred[i]);
      KILN_CHECK(expected == n.outputs[i]->type, where, "output ", i, " (", value_str(n.outputs[i]),
                 ") has type ", type_str(n.outputs[i]->type), " but ", n.op->name, " infers ",
                 type_str(expected), " from ", types_str(n.inputs),
                 ". Fix: the pass that rewrote this node must update its output types.");
    }
  }

  std::vector<std::unordered_set<const Value*>> scopes_;  // innermost last
  std::unordered_set<const Value*> defined_;
};

}  // namespace

void verify(const Graph& g) {
  for (const SizeBound& b : g.size_bounds())
    KILN_CHECK(holds_symbolic_size(b.size) && b.max >= 1, "[ir verify] the size bound ",
               format_size(b.size), " <= ", b.max, " (", b.where(),
               ") must bound a symbolic size by a positive number. Fix: bound only symbolic "
               "sizes.");
  Verifier().graph(g, Context{});
}

}  // namespace kiln::ir
