// The op table: every OpDef registers itself here when its definition is constructed.
#include "kiln/op.h"

#include <vector>

namespace kiln {

namespace {
std::vector<OpDef*>& registry() {
  static std::vector<OpDef*> ops;
  return ops;
}
}  // namespace

OpDef::OpDef(std::string name_, std::vector<std::string> inputs, InferFn infer_,
             LoweringClass lowering_, const Attrs& attrs_prototype_, const OpTraits& traits)
    : name(std::move(name_)),
      input_names(std::move(inputs)),
      infer(infer_),
      lowering(lowering_),
      attrs_prototype(&attrs_prototype_),
      scalar_body(traits.scalar_body),
      numerics(traits.numerics),
      differentiable(traits.differentiable),
      random(traits.random),
      side_effects(traits.side_effects),
      nondiff_inputs(traits.nondiff_inputs),
      optional_outputs(traits.optional_outputs),
      kernel_makes_outputs(traits.kernel_makes_outputs) {
  if (traits.every_device_kernel) kernels.fill(traits.every_device_kernel);
  registry().push_back(this);
}

std::span<OpDef* const> all_ops() { return registry(); }

OpDef* find_op(std::string_view name) {
  for (OpDef* op : registry())
    if (op->name == name) return op;
  return nullptr;
}

const char* lowering_class_name(LoweringClass c) {
  switch (c) {
    case LoweringClass::Elementwise: return "elementwise";
    case LoweringClass::Reduction: return "reduction";
    case LoweringClass::Contraction: return "contraction";
    case LoweringClass::View: return "view";
    case LoweringClass::Layout: return "layout";
    case LoweringClass::Random: return "random";
    case LoweringClass::Composite: return "composite";
    case LoweringClass::ControlFlow: return "control_flow";
    case LoweringClass::Fused: return "fused";
    case LoweringClass::Opaque: return "opaque";
  }
  return "?";
}

const NoAttrs& no_attrs() {
  static const NoAttrs a;
  return a;
}

}  // namespace kiln
