// Definitions of masked_select and nonzero.
#include "kiln/ops/selection.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

int64_t size_of(const InferCall& c) {
  const int64_t size = static_cast<const SelectionAttrs&>(c.attrs).size;
  KILN_CHECK(size >= 0, "[", c.op.name, "] expected a size >= 0, got ", size, ".");
  return size;
}

void infer_masked_select(InferCall& c) {
  infer::check_arity(c, 2);
  infer::check_compute_dtype(c, 0);
  const Tensor &x = c.inputs[0], &mask = c.inputs[1];
  KILN_CHECK(mask.dtype() == DType::Bool, "[masked_select] expected a bool mask, got ", mask.type_str(),
             ". Fix: compare to make one (x > 0), or convert with .to(kiln::kBool).");
  KILN_CHECK(Shape(mask.sizes()) == Shape(x.sizes()), "[masked_select] expected the mask's shape ",
             shape_str(x.sizes()), ", got ", mask.type_str(), " (kiln::masked_select broadcasts them first).");
  c.outputs.push_back({x.dtype(), Shape{size_of(c)}, x.device()});
}

void infer_nonzero(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  c.outputs.push_back({DType::Int64, Shape{size_of(c), x.dim()}, x.device()});
}

}  // namespace

OpDef masked_select("masked_select", {"x", "mask"}, infer_masked_select, LoweringClass::Opaque,
                    attrs_of<SelectionAttrs>(), {.nondiff_inputs = 0b10});
OpDef nonzero("nonzero", {"x"}, infer_nonzero, LoweringClass::Opaque, attrs_of<SelectionAttrs>(),
              {.differentiable = false});

}  // namespace kiln::ops
