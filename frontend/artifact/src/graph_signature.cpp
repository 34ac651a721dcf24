// An artifact's signature and symbol ranges as its graphs imply them, and the weights'
// record of the symbols' ranges.
#include "kiln/artifact/graph_signature.h"

#include <algorithm>

#include "kiln/error.h"
#include "kiln/ir/symbols.h"

namespace kiln::artifact {

std::vector<DimSpec> dim_specs(const Shape& shape) {
  std::vector<DimSpec> dims;
  for (int64_t d : shape)
    dims.push_back(ir::is_symbolic_size(d) ? DimSpec{0, ir::format_size(d)} : DimSpec{d, ""});
  return dims;
}

std::vector<TensorSpec> graph_inputs(const ir::Graph& g) {
  std::vector<TensorSpec> out;
  for (const ir::GraphInput& in : g.inputs())
    if (in.kind == ir::InputKind::Input)
      out.push_back({in.name, in.value->type.dtype, dim_specs(in.value->type.shape)});
  return out;
}

std::vector<TensorSpec> graph_outputs(const ir::Graph& g) {
  std::vector<TensorSpec> out;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const ir::GraphOutput& x = g.outputs()[o];
    out.push_back({x.name.empty() ? "output" + std::to_string(o) : x.name, x.value->type.dtype,
                   dim_specs(x.value->type.shape)});
  }
  return out;
}

std::vector<SymbolRange> graph_ranges(const std::vector<const ir::Graph*>& graphs, size_t index,
                                      const std::vector<TensorSpec>& inputs,
                                      const std::vector<SymbolRange>& symbols) {
  // The size graph `g` has where `inputs` (the first graph's signature) has symbol `s`:
  // 0 when it keeps a symbol there (graphs traced apart may number their symbols apart).
  auto size_at = [&](const ir::Graph& g, const std::string& s) -> int64_t {
    std::vector<TensorSpec> own = graph_inputs(g);
    for (size_t i = 0; i < inputs.size() && i < own.size(); ++i)
      for (size_t d = 0; d < inputs[i].shape.size() && d < own[i].shape.size(); ++d)
        if (inputs[i].shape[d].symbol == s)
          return own[i].shape[d].is_static() ? own[i].shape[d].size : 0;
    return 0;
  };
  std::vector<SymbolRange> out;
  for (const SymbolRange& s : symbols) {
    const int64_t here = size_at(*graphs.at(index), s.name);
    if (here != 0) {
      out.push_back({s.name, here, here});
      continue;
    }
    bool specialized_to_one = false;
    for (const ir::Graph* g : graphs)
      specialized_to_one = specialized_to_one || size_at(*g, s.name) == 1;
    out.push_back({s.name, specialized_to_one ? 2 : s.min, s.max});
  }
  return out;
}

std::string symbols_record(const std::vector<SymbolRange>& symbols) {
  json::Array out;
  for (const SymbolRange& s : symbols) out.push_back(json::Array{s.name, s.min, s.max});
  return json::dump(out);
}

std::vector<SymbolRange> parse_symbols_record(const std::string& record,
                                              const std::string& origin) {
  auto refuse = [&]() {
    KILN_FAIL("[kiln_rt] ", origin, ": expected the \"", kSymbolsMetadataKey,
              "\" metadata entry to list the symbols' ranges as [[name, min, max], ...], found ",
              record.empty() ? std::string("none") : "'" + record + "'",
              ". Fix: export the model again (kiln::export_model or `kiln export`).");
  };
  std::vector<SymbolRange> out;
  try {
    json::Value v = json::parse(record, {.max_depth = 4, .max_values = 10'000});
    if (!v.is_array()) refuse();
    for (const json::Value& s : v.as_array()) {
      if (!s.is_array() || s.as_array().size() != 3 || !s.as_array()[0].is_string() ||
          !s.as_array()[1].is_int() || !s.as_array()[2].is_int())
        refuse();
      out.push_back(
          {s.as_array()[0].as_string(), s.as_array()[1].as_int(), s.as_array()[2].as_int()});
    }
  } catch (const json::ParseError&) {
    refuse();
  }
  return out;
}

}  // namespace kiln::artifact
