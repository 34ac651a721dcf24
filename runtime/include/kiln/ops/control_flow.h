// Control-flow ops: nodes whose bodies are IR regions. The tracer records them (kiln::cond,
// kiln::while_loop, kiln::fori_loop, kiln::scan); eager code never dispatches them, so they
// have no kernels, and executors run their regions. Operand layout, where "captures" are
// outer values the bodies read (passed explicitly, since regions are isolated):
//   cond(pred, operands..., captures...)   regions: true, false    (operands, captures) -> results
//   while_loop(carry..., captures...)      regions: cond -> bool[], body -> carry
//   fori_loop(carry..., captures...)       region:  body(i: int64[], carry, captures) -> carry
//   scan(init..., xs..., captures...)      region:  fn(carry, x slices, captures) -> (carry, ys)
//                                          (reverse: steps run from the last slice to the
//                                          first; ys[t] still belongs to xs[t])
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct WhileLoopAttrs : AttrsOf<WhileLoopAttrs> {
  int64_t num_carry = 0;
  template <class V>
  void fields(V& v) {
    v("num_carry", num_carry);
  }
};

struct ForiLoopAttrs : AttrsOf<ForiLoopAttrs> {
  int64_t lower = 0, upper = 0, num_carry = 0;
  template <class V>
  void fields(V& v) {
    v("lower", lower), v("upper", upper), v("num_carry", num_carry);
  }
};

struct ScanAttrs : AttrsOf<ScanAttrs> {
  int64_t num_carry = 0, num_xs = 0, length = 0;
  bool reverse = false;
  template <class V>
  void fields(V& v) {
    v("num_carry", num_carry), v("num_xs", num_xs), v("length", length), v("reverse", reverse);
  }
};

extern OpDef cond, while_loop, fori_loop, scan;

}  // namespace kiln::ops
