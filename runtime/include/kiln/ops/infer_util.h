// Helpers shared by op infer functions: the common result shapes and the checks whose
// messages every op should word the same way.
#pragma once

#include "kiln/op.h"

namespace kiln::infer {

// Output = input 0's type (unary elementwise ops).
void same_as_input(InferCall& c);
// Output shape = broadcast of all inputs; dtype = input 0's (inputs must share a dtype).
void broadcast_same_dtype(InferCall& c);
// Like broadcast_same_dtype but the output is bool (comparisons, logical ops).
void broadcast_to_bool(InferCall& c);

// Throws unless `t` has one of the compute dtypes the op accepts.
void check_floating(const InferCall& c, size_t input);
void check_compute_dtype(const InferCall& c, size_t input);
void check_same_dtype(const InferCall& c);
void check_arity(const InferCall& c, size_t n);

}  // namespace kiln::infer
