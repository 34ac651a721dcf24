// Definitions of the factory ops.
#include "kiln/ops/factory.h"

#include <cmath>

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

void infer_full(InferCall& c) {
  const auto& a = static_cast<const FullAttrs&>(c.attrs);
  for (int64_t s : a.shape)
    KILN_CHECK(s >= 0, "[full] sizes must be non-negative, got ", shape_str(a.shape), ".");
  c.outputs.push_back({a.dtype, a.shape, a.device});
}

void infer_arange(InferCall& c) {
  const auto& a = static_cast<const ArangeAttrs&>(c.attrs);
  KILN_CHECK(a.step != 0, "[arange] step must be non-zero.");
  KILN_CHECK(std::isfinite(a.start) && std::isfinite(a.end), "[arange] start and end must be finite.");
  KILN_CHECK((a.end - a.start) / a.step >= 0, "[arange] the range [", a.start, ", ", a.end, ") with step ",
             a.step, " goes the wrong way. Fix: flip the sign of step.");
  int64_t n = static_cast<int64_t>(std::ceil((a.end - a.start) / a.step));
  c.outputs.push_back({a.dtype, Shape{n}, a.device});
}

}  // namespace

OpDef full("full", {}, infer_full, LoweringClass::Layout);
OpDef arange("arange", {}, infer_arange, LoweringClass::Layout);

namespace {
struct Properties {
  Properties() {
    full.differentiable = false;
    arange.differentiable = false;
  }
} properties;
}  // namespace

}  // namespace kiln::ops
