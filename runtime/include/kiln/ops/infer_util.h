// Helpers shared by op infer functions: the common result shapes and the checks whose
// messages every op should word the same way.
#pragma once

#include "kiln/op.h"

namespace kiln::infer {

// A 0-d host tensor that does not require grad (a wrapped number like the 2 in x * 2, or a
// value read back with sum()): an elementwise op takes it beside tensors of any device, and
// the device's kernel reads its value, as PyTorch does with CPU scalars, so `x * 2` on a GPU
// copies nothing to the GPU first.
bool is_host_scalar(const Tensor& t);
// The device an elementwise op's result lives on: its first input that is not a host scalar
// (input 0's device when all are).
Device elementwise_device(const InferCall& c);

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
