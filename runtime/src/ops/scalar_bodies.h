// The scalar bodies of the elementwise ops (kiln/scalar_body.h): one function per op,
// assigned to OpDef::scalar_body next to the op definitions.
#pragma once

#include <type_traits>

#include "kiln/scalar_body.h"

namespace kiln::ops::scalar_bodies {

// The function type of a ScalarBodyFn, so that one line declares many bodies.
using Body = std::remove_pointer_t<ScalarBodyFn>;

// Each computes what the op's eager CPU kernel (backends/cpu/kernels/elementwise.cpp)
// computes, bit for bit except where scalar_bodies.cpp says otherwise.
Body neg, abs, exp, log, log1p, sqrt, rsqrt, sin, cos, tanh, sigmoid, relu, silu, erf, square,
    reciprocal, sign, floor, ceil, round, gelu, leaky_relu, elu, clamp, pow_scalar, cast, erfinv;
Body add, sub, mul, div, pow, atan2, maximum, minimum;
Body eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_not, where;

// The elementwise loss (ops/loss.h, backends/cpu/kernels/loss.cpp): 2 operands, or 3 with
// pos_weight (a third operand with id < 0 counts as absent).
Body binary_cross_entropy_with_logits;

}  // namespace kiln::ops::scalar_bodies
