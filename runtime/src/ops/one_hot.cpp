// Definition of one_hot.
#include "kiln/ops/one_hot.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

void infer_one_hot(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& idx = c.inputs[0];
  KILN_CHECK(idx.dtype() == DType::Int64, "[one_hot] expected int64 class indices, got ",
             idx.type_str(), ". Fix: convert with .to(kiln::kInt64).");
  const auto& a = static_cast<const OneHotAttrs&>(c.attrs);
  KILN_CHECK(a.num_classes >= 0, "[one_hot] expected num_classes >= 0, got ", a.num_classes, ".");
  Shape out(idx.sizes());
  out.push_back(a.num_classes);
  c.outputs.push_back({DType::Int64, out, idx.device()});
}

}  // namespace

OpDef one_hot("one_hot", {"indices"}, infer_one_hot, LoweringClass::Layout, attrs_of<OneHotAttrs>(),
              {.differentiable = false});

}  // namespace kiln::ops
