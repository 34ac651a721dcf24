// Factories: ops with no tensor inputs that create tensors (LoweringClass::Layout, or
// Random for the ones that draw from a generator).
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct FullAttrs : AttrsOf<FullAttrs> {
  Shape shape;
  double value = 0;
  DType dtype = DType::Float32;
  Device device;
  template <class V> void fields(V& v) { v("shape", shape), v("value", value), v("dtype", dtype), v("device", device); }
};
extern OpDef full;

struct ArangeAttrs : AttrsOf<ArangeAttrs> {
  double start = 0, end = 0, step = 1;
  DType dtype = DType::Int64;
  Device device;
  template <class V> void fields(V& v) { v("start", start), v("end", end), v("step", step), v("dtype", dtype), v("device", device); }
};
extern OpDef arange;

}  // namespace kiln::ops
