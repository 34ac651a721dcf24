// kiln::debug_print and its vjp (the identity).
#include "kiln/debug_print.h"

#include "../call.h"
#include "../vjp_registry.h"
#include "kiln/ops/debug_print.h"

namespace kiln {

Tensor debug_print(const Tensor& x, const std::string& label) {
  KILN_CHECK(x.defined(), "[debug_print] the tensor", label.empty() ? "" : " '" + label + "'",
             " is undefined. Fix: pass a defined tensor.");
  ops::DebugPrintAttrs a;
  a.label = label;
  return detail::call1(ops::debug_print, {x}, a);
}

namespace {
Tensors vjp_debug_print(const VjpCall& c) {
  return Tensors{c.grad_outputs[0]};
}
}  // namespace

namespace detail {
void register_debug_print_vjp() {
  set_vjp(ops::debug_print, vjp_debug_print, kSavesNothing);
}
}  // namespace detail

}  // namespace kiln
