// Definition of dropout.
#include "kiln/ops/dropout.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

void infer_dropout(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_floating(c, 0);
  const auto& a = static_cast<const DropoutAttrs&>(c.attrs);
  KILN_CHECK(a.p >= 0 && a.p <= 1, "[dropout] expected a probability p in [0, 1], got ", a.p,
             ". Fix: p is the fraction of elements to drop (e.g. 0.1).");
  const Tensor& x = c.inputs[0];
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
  c.outputs.push_back({DType::Bool, Shape(x.sizes()), x.device()});
}

}  // namespace

OpDef dropout("dropout", {"x"}, infer_dropout, LoweringClass::Random, attrs_of<DropoutAttrs>(),
              {.random = true});

}  // namespace kiln::ops
