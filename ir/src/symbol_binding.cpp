// Where a graph's symbols get their runtime values (symbol_binding.h).
#include "kiln/ir/symbol_binding.h"

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

bool attrs_hold_symbols(const Attrs& attrs) {
  bool symbolic = false;
  attrs.clone()->map_ints([&](int64_t v) {
    symbolic |= is_symbolic_size(v);
    return v;
  });
  return symbolic;
}

}  // namespace kiln::ir
