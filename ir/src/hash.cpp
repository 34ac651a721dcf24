// structural_hash: a 64-bit FNV-1a hash of the graph's canonical text form, so that it is
// stable across processes (no pointers, no std::hash) and ignores what the structure does
// not depend on: value numbers, module paths, locations and the graph's name.
#include "text_form.h"

namespace kiln::ir {

uint64_t structural_hash(const Graph& g) {
  // The canonical text holds ops, attributes (through SizeCodec, so symbols hash by name),
  // wiring, types, input kinds, names and constant data, and outputs with their names.
  std::string text = print_graph(g, PrintOptions{.canonical = true});
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace kiln::ir
