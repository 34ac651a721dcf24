// Checks shared by the infer functions of the neural-network ops (losses, norms, pooling):
// optional per-channel inputs, index tensors, reduction names and 2-D window parameters.
#pragma once

#include <string>

#include "kiln/op.h"

namespace kiln::infer {

// True when optional input i was given (an undefined tensor means "none").
inline bool has_input(const InferCall& c, size_t i) {
  return c.inputs.size() > i && c.inputs[i].defined();
}

// Input i, when given, must be a 1-D tensor of `n` elements with input 0's dtype.
void check_optional_vector(const InferCall& c, size_t i, int64_t n, const char* what);

// Input i must be an integer (int64 or int32) tensor of class/row indices.
void check_index_tensor(const InferCall& c, size_t i);

// reduction must be "mean", "sum" or "none".
void check_reduction(const InferCall& c, const std::string& reduction);

// A 2-D window parameter (kernel size, stride, padding, dilation) must have two entries,
// each at least `min`.
void check_pair(const InferCall& c, IntList v, const char* name, int64_t min);

// Input 0 must be a floating [N, C, H, W] (or [C, H, W] when `allow_unbatched`) tensor.
void check_image(const InferCall& c, bool allow_unbatched);

}  // namespace kiln::infer
