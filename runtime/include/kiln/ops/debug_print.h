// debug_print: an op whose kernel prints its input (with a label) and returns it unchanged.
// Being an op, it is recorded by traces and prints on every compiled call too; passes must
// keep it (OpDef::side_effects).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "kiln/op.h"

namespace kiln::ops {

struct DebugPrintAttrs : AttrsOf<DebugPrintAttrs> {
  std::string label;
  template <class V>
  void fields(V& v) {
    v("label", label);
  }
};
extern OpDef debug_print;

// Where debug_print writes ("label: tensor(...)" lines); empty: standard output.
void set_debug_print_sink(std::function<void(std::string_view line)> sink);

}  // namespace kiln::ops
