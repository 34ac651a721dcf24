// Shapes and strides: inline small vectors plus the arithmetic every op needs
// (element counts, contiguous strides, broadcasting, dim wrapping).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/small_vector.h"

namespace kiln {

using Shape = SmallVector<int64_t, 6>;

// A non-owning list of ints that also binds to a braced list: x.reshape({2, 3}).
// (std::span cannot, before C++26.) Like any view, it must not outlive its source.
class IntList {
 public:
  constexpr IntList() = default;
  constexpr IntList(const int64_t* data, size_t size) : data_(data), size_(size) {}
  // Binds to a braced list for the duration of the full expression (a function argument).
  // GCC's -Winit-list-lifetime warns about exactly that; clang has no such warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr IntList(std::initializer_list<int64_t> list) : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  IntList(std::span<const int64_t> s) : data_(s.data()), size_(s.size()) {}
  template <size_t N>
  IntList(const SmallVector<int64_t, N>& v) : data_(v.data()), size_(v.size()) {}
  IntList(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}

  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr const int64_t& operator[](size_t i) const { return data_[i]; }
  constexpr const int64_t& back() const { return data_[size_ - 1]; }
  constexpr const int64_t& front() const { return data_[0]; }
  constexpr IntList subspan(size_t offset, size_t count = static_cast<size_t>(-1)) const {
    return IntList(data_ + offset, count == static_cast<size_t>(-1) ? size_ - offset : count);
  }
  operator std::span<const int64_t>() const { return {data_, size_}; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  friend bool operator==(IntList a, IntList b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

// Size arithmetic that never wraps around: a * b and a + b, or nullopt when the result
// leaves int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// The same for sizes that come from outside (files, configs, attributes, the C API): a
// kiln::Error naming `what` and the operands when the result does not fit int64.
int64_t size_mul(int64_t a, int64_t b, std::string_view what);
int64_t size_add(int64_t a, int64_t b, std::string_view what);

// The element count; a kiln::Error naming the shape when it does not fit int64.
int64_t numel(IntList shape);
// Row-major strides; a kiln::Error when they do not fit int64 (with a zero-size dim the
// element count can fit while the strides do not).
Shape contiguous_strides(IntList shape);
std::string shape_str(IntList shape);  // "[2, 3]"

// Broadcasts two shapes as NumPy does; `op` names the operation in the error.
Shape broadcast_shapes(IntList a, IntList b, const char* op);

// Wraps a possibly negative dim into [0, rank); rank 0 accepts -1 and 0.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

// A bitmask of the dims a reduction covers; an empty list means all dims.
uint64_t reduction_mask(IntList dims, int64_t rank, const char* op);

}  // namespace kiln
