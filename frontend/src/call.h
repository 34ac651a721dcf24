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

// The tensors an op's vjp reads, which autograd keeps alive until backward. The default
// keeps every input and no output.
struct Saves {
  uint64_t inputs = ~0ull;  // bit i: the vjp reads input i
  uint64_t outputs = 0;     // bit i: the vjp reads output i
};
inline constexpr Saves kSavesNothing{.inputs = 0, .outputs = 0};
inline constexpr Saves kSavesOutput{.inputs = 0, .outputs = 1};  // the vjp reads output 0 only

// Sets an op's vjp together with what it reads (frontend registration helper).
inline void set_vjp(OpDef& op, VjpFn vjp, Saves saves = {}) {
  op.vjp = vjp;
  op.saves_inputs = saves.inputs;
  op.saves_outputs = saves.outputs;
}

}  // namespace kiln::detail
