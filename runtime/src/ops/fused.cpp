// The fusion-group entry. Its result types are its region's, which infer cannot see: the
// verifier checks the region's signature instead (ir/src/verify.cpp).
#include "kiln/ops/fused.h"

#include "kiln/error.h"

namespace kiln::ops {

namespace {

void infer_from_region(InferCall& c) {
  KILN_FAIL(
      "[fused] is a fusion group made by the compiler's fusion pass: its result types "
      "come from its region, so it is never dispatched. Fix: run the graph through an "
      "executor (kiln::interp::Executable or a compiled backend).");
}

}  // namespace

OpDef fused("fused", {"..."}, infer_from_region, LoweringClass::Fused, attrs_of<FusedAttrs>(),
            {.differentiable = false});

}  // namespace kiln::ops
