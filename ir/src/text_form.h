// Pieces of the IR text form shared by the printer, the parser, the hash and the DOT
// export: the integer codec for symbolic sizes, string quoting and the canonical printer.
#pragma once

#include <string>
#include <string_view>

#include "kiln/attrs.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"

namespace kiln::ir {

// Integer attributes print and parse through format_size/parse_size, so a symbolic size
// in an attribute (a reshape target s0*784) reads as a symbol.
class SizeCodec final : public IntCodec {
 public:
  void print(std::ostream& os, int64_t v) const override { os << format_size(v); }
  int64_t parse(std::string_view text) const override { return parse_size(text); }
};

// "text" with `"`, `\` and newlines escaped (\", \\, \n).
std::string quote(std::string_view s);
// Names and module paths print bare when made of [A-Za-z0-9_.] only, else quoted.
bool is_bare_word_char(char c);
std::string bare_or_quoted(std::string_view s);

struct PrintOptions {
  // For the structural hash: values renumbered by order of definition; the graph name,
  // module paths and locations left out.
  bool canonical = false;
};
std::string print_graph(const Graph& g, const PrintOptions& options);

}  // namespace kiln::ir
