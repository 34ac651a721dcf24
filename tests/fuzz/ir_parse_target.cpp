// Fuzz target: the IR text parser and verifier. A graph the parser accepts must print to text
// that parses back and prints identically; a verified graph's reparse verifies too and keeps
// its structural hash.
#include "fuzz/fuzz_targets.h"
#include "kiln/ir/graph.h"

namespace kiln::fuzz {

int fuzz_ir_parse(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = ir::parse_graph(text);
  } catch (const Error&) {
    return 0;
  }
  bool verified = true;
  try {
    ir::verify(*graph);
  } catch (const Error&) {
    verified = false;
  }
  const std::string printed = must_succeed("print_graph", [&] { return ir::print_graph(*graph); });
  std::unique_ptr<ir::Graph> reparsed =
      must_succeed("parse_graph of print_graph", [&] { return ir::parse_graph(printed); });
  const std::string reprinted = ir::print_graph(*reparsed);
  KILN_FUZZ_EXPECT(reprinted == printed, "print(parse(print(g))) differs from print(g):\n",
                   printed, "\n---- reprinted ----\n", reprinted);
  if (verified) {
    must_succeed("verify of the reparsed graph", [&] { ir::verify(*reparsed); });
    KILN_FUZZ_EXPECT(ir::structural_hash(*reparsed) == ir::structural_hash(*graph),
                     "the structural hash changed in the round trip:\n", printed);
    std::unique_ptr<ir::Graph> copy = ir::clone_graph(*graph);
    KILN_FUZZ_EXPECT(ir::print_graph(*copy) == printed, "clone_graph prints differently:\n",
                     printed);
    (void)ir::to_dot(*graph);
  }
  return 0;
}

}  // namespace kiln::fuzz
