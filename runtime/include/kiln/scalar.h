// Scalar: a host number (bool, integer or floating) with its category, used for fill
// values, scalar operands (x + 2.5) and item().
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "kiln/dtype.h"

namespace kiln {

class Scalar {
 public:
  Scalar() : kind_(DType::Int64), i_(0) {}
  Scalar(bool v) : kind_(DType::Bool), i_(v) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(DType::Int64), i_(static_cast<int64_t>(v)) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(DType::Float64), d_(static_cast<double>(v)) {}
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}

  // Bool, Int64 or Float64: the category that type promotion uses.
  DType kind() const { return kind_; }
  bool is_floating() const { return kind_ == DType::Float64; }
  bool is_integral() const { return kind_ == DType::Int64; }
  bool is_bool() const { return kind_ == DType::Bool; }

  template <class T>
  T to() const {
    if (kind_ == DType::Float64) return static_cast<T>(d_);
    return static_cast<T>(i_);
  }
  double to_double() const { return to<double>(); }
  int64_t to_int() const { return to<int64_t>(); }

  friend std::ostream& operator<<(std::ostream& os, const Scalar& s) {
    if (s.kind_ == DType::Float64) return os << s.d_;
    if (s.kind_ == DType::Bool) return os << (s.i_ ? "true" : "false");
    return os << s.i_;
  }

 private:
  DType kind_;
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace kiln
