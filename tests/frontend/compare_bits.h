// Tensor comparisons for the differential tests: bitwise (eager vs traced + interp) and
// within a tolerance (eager vs generated kernels).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Whether a and b are both undefined, or have one shape and dtype and `equal` holds for
// every pair of elements (read as doubles).
template <class Equal>
::testing::AssertionResult elementwise_match(const Tensor& a, const Tensor& b, Equal equal) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (!(Shape(a.sizes()) == Shape(b.sizes())) || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.type_str() << " vs " << b.type_str();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::isnan(x[i]) && std::isnan(y[i])) && !equal(x[i], y[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

// Same shape, dtype and bits in every element (nan matches nan; -0 does not match 0).
inline ::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  return elementwise_match(
      a, b, [](double x, double y) { return x == y && std::signbit(x) == std::signbit(y); });
}

// Same shape and dtype, and every element within atol + rtol * |b| of b's (nan matches nan,
// infinities must be equal): compiled kernels may evaluate in another order than eager.
inline ::testing::AssertionResult close_to(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                           double atol = 1e-6) {
  return elementwise_match(a, b, [&](double x, double y) {
    return x == y || std::abs(x - y) <= atol + rtol * std::abs(y);
  });
}

}  // namespace kiln
