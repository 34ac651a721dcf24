// Planning symbolic dims and validating a symbolic trace against its twin.
#include "dynamic_shapes.h"

#include <map>

#include "kiln/ir/symbols.h"

namespace kiln::detail {

namespace {

// v with every alternate sentinel factor replaced by the main one of the same index.
int64_t to_main(int64_t v) {
  if (v <= 0) return v;
  int64_t out = 1;
  bool any = false;
  for (int k = 0; k < ir::kMaxSymbols; ++k) {
    int64_t alt = ir::alternate_symbol_value(k);
    while (v % alt == 0) {
      v /= alt;
      out *= ir::symbol_value(k);
      any = true;
    }
  }
  return any ? out * v : v;
}

void translate_graph(ir::Graph& g) {
  for (ir::SizeBound& b : g.mutable_size_bounds()) b.size = to_main(b.size);
  auto fix_type = [](ir::Type& t) {
    for (int64_t& d : t.shape) d = to_main(d);
  };
  for (ir::GraphInput& in : g.mutable_inputs()) fix_type(in.value->type);
  for (const auto& node : g.nodes()) {
    node->attrs->map_ints(to_main);
    for (ir::Value* v : node->outputs) fix_type(v->type);
    for (const auto& region : node->regions) translate_graph(*region);
  }
}

std::string node_description(const ir::Node& n) {
  std::string out = n.op->name;
  if (n.loc.known()) out += " at " + ir::location_str(n.loc);
  out += n.module_path.empty() ? " in the root module" : " in module '" + n.module_path + "'";
  return out;
}

bool same_node(const ir::Node& a, const ir::Node& b) {
  if (a.op != b.op || a.attrs->str() != b.attrs->str() || a.outputs.size() != b.outputs.size() ||
      a.inputs.size() != b.inputs.size())
    return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (!(a.outputs[i]->type == b.outputs[i]->type)) return false;
  return true;
}

// Compares what the bounds say, not where they come from (reading a location costs a
// debug-info lookup).
bool same_bounds(const std::vector<ir::SizeBound>& a, const std::vector<ir::SizeBound>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size != b[i].size || a[i].max != b[i].max || a[i].op != b[i].op) return false;
  return true;
}

}  // namespace

SymbolPlan plan_symbols(const std::vector<Tensor>& inputs, const std::vector<uint64_t>& dynamic) {
  SymbolPlan plan;
  std::map<int64_t, int> by_size;  // duck sizing
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    // A non-contiguous input traces with its own strides: its dims stay static.
    std::vector<int> dims(t.defined() ? static_cast<size_t>(t.dim()) : 0, -1);
    if (t.defined() && !t.is_contiguous()) {
      plan.symbols.push_back(std::move(dims));
      continue;
    }
    for (size_t d = 0; d < dims.size() && d < 64; ++d) {
      int64_t size = t.size(static_cast<int64_t>(d));
      if (!((dynamic[i] >> d) & 1) || size < 2) continue;
      auto it = by_size.find(size);
      if (it == by_size.end()) {
        if (plan.count == ir::kMaxSymbols) continue;  // out of symbols: stays static
        it = by_size.emplace(size, plan.count++).first;
      }
      dims[d] = it->second;
    }
    plan.symbols.push_back(std::move(dims));
  }
  return plan;
}

Shape traced_shape(const Tensor& t, const std::vector<int>& symbols, bool alternate) {
  Shape shape(t.sizes());
  for (size_t d = 0; d < symbols.size(); ++d) {
    if (symbols[d] < 0) continue;
    shape[d] = alternate ? ir::alternate_symbol_value(symbols[d]) : ir::symbol_value(symbols[d]);
  }
  return shape;
}

void translate_alternate(ir::Graph& g) {
  translate_graph(g);
}

std::optional<std::string> first_difference(const ir::Graph& a, const ir::Graph& b) {
  // A constant made on the host from a size (indices up to x.size(0)) differs too.
  const auto& ia = a.inputs();
  const auto& ib = b.inputs();
  for (size_t i = 0; i < ia.size() && i < ib.size(); ++i) {
    bool same = ia[i].kind == ib[i].kind && ia[i].value->type == ib[i].value->type;
    if (same && ia[i].kind == ir::InputKind::Constant)
      same = ia[i].constant.to_vector<double>() == ib[i].constant.to_vector<double>();
    if (!same) return "the graph input '" + ia[i].name + "' (a tensor made on the host)";
  }
  if (ia.size() != ib.size()) return std::string("the graph's inputs");
  if (!same_bounds(a.size_bounds(), b.size_bounds())) return std::string("the graph's size bounds");
  const auto& na = a.nodes();
  const auto& nb = b.nodes();
  for (size_t i = 0; i < na.size() && i < nb.size(); ++i)
    if (!same_node(*na[i], *nb[i])) return node_description(*na[i]);
  if (na.size() != nb.size()) {
    const ir::Node& n = na.size() > nb.size() ? *na[nb.size()] : *nb[na.size()];
    return node_description(n);
  }
  for (size_t i = 0; i < a.outputs().size() && i < b.outputs().size(); ++i)
    if (!(a.outputs()[i].value->type == b.outputs()[i].value->type)) return "the graph's outputs";
  return std::nullopt;
}

}  // namespace kiln::detail
