// Tensor factories. Random factories draw from kiln::default_generator() (or the one
// given), so kiln::manual_seed(s) makes every run repeat exactly, on every machine.
#pragma once

#include <initializer_list>
#include <optional>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln {

struct TensorOptions {
  DType dtype = default_dtype();
  Device device = kCPU;
  bool requires_grad = false;

  TensorOptions() = default;
  TensorOptions(DType t) : dtype(t) {}  // allows zeros({2}, kInt64)
  TensorOptions with_dtype(DType t) const { auto o = *this; o.dtype = t; return o; }
  TensorOptions with_device(Device d) const { auto o = *this; o.device = d; return o; }
  TensorOptions with_requires_grad(bool r) const { auto o = *this; o.requires_grad = r; return o; }
};

Tensor empty(IntList sizes, TensorOptions options = {});
Tensor zeros(IntList sizes, TensorOptions options = {});
Tensor ones(IntList sizes, TensorOptions options = {});
Tensor full(IntList sizes, Scalar value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor empty_like(const Tensor& t);

// A 1-D tensor from a list; dtype from the values (float32 for floating values).
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
Tensor tensor(std::initializer_list<int64_t> values, TensorOptions options = {});
Tensor tensor(std::initializer_list<int> values, TensorOptions options = {});

// [start, end) in steps of `step`; int64 when all three are integers, else float32.
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = 1);
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options);

}  // namespace kiln
