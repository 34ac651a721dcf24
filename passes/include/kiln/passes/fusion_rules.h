// What a backend can run as one generated kernel. The fuse pass is target-independent: it
// finds groups of ops that could share one loop, and asks the backend it compiles for
// whether each op may join one (backends/include/kiln/backends/backend.h hands these rules
// to the pipeline through PassContext::fusion).
#pragma once

#include <string_view>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/op.h"

namespace kiln::passes {

class FusionRules {
 public:
  virtual ~FusionRules() = default;
  // The backend the rules are for ("cpu"), for messages.
  virtual std::string_view target() const = 0;
  // Whether `op` may be part of a generated kernel when one of its operands or results has
  // this dtype and lives on this device. Fuse asks it for every operand and result of an op
  // whose lowering class it can group (elementwise ops with a scalar body, row reductions).
  virtual bool can_fuse(const OpDef& op, DType dtype, Device device) const = 0;
};

}  // namespace kiln::passes
