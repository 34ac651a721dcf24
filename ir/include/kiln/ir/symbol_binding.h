// Binding a graph's symbols to runtime sizes: every symbol is some user input's dim, so
// each call reads the symbols' values off its inputs. Executors substitute them into
// shapes and attributes (ir::substitute_size).
#pragma once

#include <array>
#include <span>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"

namespace kiln::ir {

// Symbol `symbol` is the size of dim `dim` of graph input `input`.
struct SymbolSource {
  size_t input = 0;
  size_t dim = 0;
  int symbol = 0;
};

// Where each symbol of `g` comes from. Throws kiln::Error (prefixed by `who`, e.g.
// "[interp]") when a parameter, buffer or constant has a symbolic dim, or an input dim is
// not a single symbol (s0*784).
std::vector<SymbolSource> symbol_sources(const Graph& g, const char* who);

// The runtime value of every symbol, read off one call's inputs (unused symbols are 0).
using SymbolValues = std::array<int64_t, kMaxSymbols>;
SymbolValues bind_symbols(std::span<const SymbolSource> sources, std::span<const Tensor> inputs);

// Throws kiln::Error (prefixed by `who`) unless every user input (InputKind::Input) among
// `inputs` has its graph input's type: the dtype, the rank, every static dim, and every
// symbolic dim equal to its value under `values`. Executors check before they run, so an
// input of another shape never reaches kernels compiled for the graph's, whatever guard
// or artifact manifest let it through. Also throws when the call breaks one of the graph's
// size bounds (SizeBound).
void check_input_types(const Graph& g, std::span<const Tensor> inputs, const SymbolValues& values,
                       const char* who);

// Whether integer attributes hold symbolic sizes (a reshape to [s0, 784]): executors then
// substitute the call's sizes into a copy of them (Attrs::map_ints).
bool attrs_hold_symbols(const Attrs& attrs);

}  // namespace kiln::ir
