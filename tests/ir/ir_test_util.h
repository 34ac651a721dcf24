// Helpers the IR tests share: ops by name and float32 types.
#pragma once

#include <stdexcept>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln::ir::testing {

inline const OpDef& op(const char* name) {
  const OpDef* o = find_op(name);
  if (!o) throw std::runtime_error(std::string("no op ") + name);
  return *o;
}

inline Type f32(Shape shape) {
  return {DType::Float32, std::move(shape), kCPU};
}

}  // namespace kiln::ir::testing
