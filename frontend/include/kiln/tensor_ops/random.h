// Random factories (rand, randn, randint, bernoulli) and linspace/eye. Random functions
// draw from `generator`, or kiln::default_generator() when it is null; the same seed gives
// the same numbers on every machine and for every thread count.
#pragma once

#include "kiln/generator.h"
#include "kiln/tensor.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln {

// Uniform on [0, 1).
Tensor rand(IntList sizes, TensorOptions options = {}, Generator* generator = nullptr);
// Standard normal.
Tensor randn(IntList sizes, TensorOptions options = {}, Generator* generator = nullptr);
Tensor rand_like(const Tensor& t, Generator* generator = nullptr);
Tensor randn_like(const Tensor& t, Generator* generator = nullptr);
// Uniform integers in [low, high) (int64 unless options say otherwise).
Tensor randint(int64_t low, int64_t high, IntList sizes, TensorOptions options = kInt64,
               Generator* generator = nullptr);
Tensor randint(int64_t high, IntList sizes, TensorOptions options = kInt64,
               Generator* generator = nullptr);
// 1 with probability p[i], else 0, in p's floating dtype; every p must lie in [0, 1].
Tensor bernoulli(const Tensor& p, Generator* generator = nullptr);
// A tensor shaped and typed like x, each element 1 with probability p.
Tensor bernoulli(const Tensor& x, double p, Generator* generator = nullptr);

// `steps` evenly spaced values from start to end, both included.
Tensor linspace(Scalar start, Scalar end, int64_t steps, TensorOptions options = {});
// The n x n (or n x m) identity matrix.
Tensor eye(int64_t n, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});

}  // namespace kiln
