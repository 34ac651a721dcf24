// Symbolic input dims: which dims a trace makes symbolic (duck sizing: dims of equal size
// share one symbol), the sentinel shapes it traces with, and the check that the graph holds
// for every size. A graph is traced twice with two disjoint sentinel sets; when the two
// disagree after translation, some op used a size in a way the encoding cannot carry (a
// sum or a quotient of sizes, a host comparison) and the dims go back to static.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::detail {

struct SymbolPlan {
  std::vector<std::vector<int>> symbols;  // per input, per dim: symbol index or -1
  int count = 0;
  bool any() const { return count > 0; }
};

// `dynamic[i]` has bit d set when input i's dim d should be symbolic; sizes 0 and 1 stay
// static. At most ir::kMaxSymbols distinct sizes become symbols.
SymbolPlan plan_symbols(const std::vector<Tensor>& inputs, const std::vector<uint64_t>& dynamic);
// Input i's traced shape: sentinels (main or alternate set) in place of symbolic dims.
Shape traced_shape(const Tensor& t, const std::vector<int>& symbols, bool alternate);
// Rewrites alternate sentinels into the main set in every type and integer attribute.
void translate_alternate(ir::Graph& g);
// Where two traces of one forward differ: "<op> at <file:line> in module '<path>'"; nullopt
// when they agree.
std::optional<std::string> first_difference(const ir::Graph& a, const ir::Graph& b);

}  // namespace kiln::detail
