// Where a graph's symbols get their runtime values (symbol_binding.h).
#include "kiln/ir/symbol_binding.h"

#include <string>

#include "kiln/error.h"

namespace kiln::ir {

std::vector<SymbolSource> symbol_sources(const Graph& g, const char* who) {
  std::vector<SymbolSource> sources;
  const auto& inputs = g.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& shape = inputs[i].value->type.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      auto s = decode_size(shape[d]);
      if (!s) continue;
      int symbol = -1, factors = 0;
      for (int k = 0; k < kMaxSymbols; ++k) {
        factors += s->exponents[k];
        if (s->exponents[k]) symbol = k;
      }
      KILN_CHECK(inputs[i].kind == InputKind::Input && factors == 1 && s->coeff == 1, who,
                 " graph input '", inputs[i].name, "' has size ", format_size(shape[d]), " in dim ",
                 d, ": only user inputs may have symbolic dims, each a single symbol.");
      sources.push_back({i, d, symbol});
    }
  }
  return sources;
}

SymbolValues bind_symbols(std::span<const SymbolSource> sources, std::span<const Tensor> inputs) {
  SymbolValues values{};
  for (const SymbolSource& src : sources)
    values[static_cast<size_t>(src.symbol)] = inputs[src.input].size(static_cast<int64_t>(src.dim));
  return values;
}

void check_input_types(const Graph& g, std::span<const Tensor> inputs, const SymbolValues& values,
                       const char* who) {
  const auto& graph_inputs = g.inputs();
  for (size_t i = 0; i < graph_inputs.size() && i < inputs.size(); ++i) {
    const GraphInput& in = graph_inputs[i];
    const Tensor& x = inputs[i];
    if (in.kind != InputKind::Input || !x.defined()) continue;
    const Type& want = in.value->type;
    // The message is built only on failure: a call that fits formats nothing.
    auto refuse = [&](const std::string& why) {
      KILN_FAIL(who, " graph ", g.name(), ": input '", in.name, "' expects ", type_str(want),
                ", got ", x.type_str(), ": ", why,
                ". Fix: pass an input of the graph's type (the caller's guards or the artifact's "
                "manifest should have refused this one).");
    };
    if (x.dtype() != want.dtype) refuse("another dtype");
    if (x.dim() != static_cast<int64_t>(want.shape.size()))
      refuse("rank " + std::to_string(x.dim()) + ", not " + std::to_string(want.shape.size()));
    for (size_t d = 0; d < want.shape.size(); ++d) {
      const int64_t expected = substitute_size(want.shape[d], values);
      const int64_t got = x.size(static_cast<int64_t>(d));
      if (got != expected)
        refuse("dim " + std::to_string(d) + " is " + std::to_string(got) + ", not " +
               std::to_string(expected) +
               (is_symbolic_size(want.shape[d]) ? " (" + format_size(want.shape[d]) + " here)"
                                                : std::string()));
    }
  }
  for (const SizeBound& b : g.size_bounds()) {
    const int64_t value = substitute_size(b.size, values);
    KILN_CHECK(value <= b.max, who, " graph ", g.name(), ": ", format_size(b.size), " is ", value,
               " in this call, but the graph holds only while ", format_size(b.size), " <= ", b.max,
               " (", b.where(), "). Fix: keep the size within ", b.max,
               ", or compile the model again for it (kiln::compile retraces such a call).");
  }
}

bool attrs_hold_symbols(const Attrs& attrs) {
  bool symbolic = false;
  attrs.clone()->map_ints([&](int64_t v) {
    symbolic |= is_symbolic_size(v);
    return v;
  });
  return symbolic;
}

}  // namespace kiln::ir
