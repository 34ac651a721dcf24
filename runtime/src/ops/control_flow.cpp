// The control-flow op entries. Their result types come from their regions, which infer
// cannot see: the verifier checks region signatures instead (ir/src/verify.cpp).
#include "kiln/ops/control_flow.h"

#include "kiln/error.h"

namespace kiln::ops {

namespace {

void infer_from_regions(InferCall& c) {
  KILN_FAIL("[", c.op.name,
            "] is a control-flow op: its result types come from its regions, "
            "so it is recorded by the tracer (kiln::",
            c.op.name,
            ") and never dispatched. Fix: "
            "call kiln::",
            c.op.name, " instead of dispatching the op.");
}

constexpr auto CF = LoweringClass::ControlFlow;

}  // namespace

OpDef cond("cond", {"pred", "..."}, infer_from_regions, CF);
OpDef while_loop("while_loop", {"..."}, infer_from_regions, CF, attrs_of<WhileLoopAttrs>());
OpDef fori_loop("fori_loop", {"..."}, infer_from_regions, CF, attrs_of<ForiLoopAttrs>());
OpDef scan("scan", {"..."}, infer_from_regions, CF, attrs_of<ScanAttrs>());

}  // namespace kiln::ops
