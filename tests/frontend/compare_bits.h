// Bitwise tensor comparison for the differential tests (eager vs traced + interp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Same shape, dtype and bits in every element (nan matches nan; -0 does not match 0).
inline ::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (!(Shape(a.sizes()) == Shape(b.sizes())) || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.type_str() << " vs " << b.type_str();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    bool equal = (std::isnan(x[i]) && std::isnan(y[i])) ||
                 (x[i] == y[i] && std::signbit(x[i]) == std::signbit(y[i]));
    if (!equal)
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln
