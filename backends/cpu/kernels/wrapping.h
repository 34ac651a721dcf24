// Integer arithmetic that wraps around (as in PyTorch: abs(INT64_MIN) == INT64_MIN, sums of
// large int64 values wrap) instead of overflowing, which is undefined behaviour for signed
// types: the operation runs in the unsigned type. Floating types are unchanged.
#pragma once

#include <type_traits>

namespace kiln::cpu::kernels {

template <class T>
using Wrapping = typename std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                                             std::make_unsigned<T>, std::type_identity<T>>::type;

template <class T>
T wrapping_add(T a, T b) {
  return static_cast<T>(static_cast<Wrapping<T>>(a) + static_cast<Wrapping<T>>(b));
}
template <class T>
T wrapping_sub(T a, T b) {
  return static_cast<T>(static_cast<Wrapping<T>>(a) - static_cast<Wrapping<T>>(b));
}
template <class T>
T wrapping_mul(T a, T b) {
  return static_cast<T>(static_cast<Wrapping<T>>(a) * static_cast<Wrapping<T>>(b));
}
template <class T>
T wrapping_neg(T x) {
  return wrapping_sub(T(0), x);
}

}  // namespace kiln::cpu::kernels
