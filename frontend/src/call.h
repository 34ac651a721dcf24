// How frontend op functions call dispatch (after making sure kiln is initialized).
#pragma once

#include <initializer_list>

#include "kiln/dispatch.h"
#include "kiln/init.h"

namespace kiln::detail {

inline void ensure_initialized() {
  static const bool done = (init(), true);
  (void)done;
}

inline Tensor call1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = no_attrs()) {
  ensure_initialized();
  return dispatch1(op, TensorSpan(inputs.begin(), inputs.size()), attrs);
}

inline Tensors call(const OpDef& op, TensorSpan inputs, const Attrs& attrs = no_attrs()) {
  ensure_initialized();
  return dispatch(op, inputs, attrs);
}

// Sets the vjp slot of an op (frontend registration helper).
inline void set_vjp(OpDef& op, VjpFn vjp) { op.vjp = vjp; }

}  // namespace kiln::detail
