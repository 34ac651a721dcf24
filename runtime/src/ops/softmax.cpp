// Definitions of softmax and log_softmax.
#include "kiln/ops/softmax.h"

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

void infer_softmax(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_floating(c, 0);
  const Tensor& x = c.inputs[0];
  wrap_dim(static_cast<const SoftmaxAttrs&>(c.attrs).dim, x.dim(), c.op.name.c_str());
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

}  // namespace

OpDef softmax("softmax", {"x"}, infer_softmax, LoweringClass::Composite, attrs_of<SoftmaxAttrs>());
OpDef log_softmax("log_softmax", {"x"}, infer_softmax, LoweringClass::Composite,
                  attrs_of<SoftmaxAttrs>());

}  // namespace kiln::ops
