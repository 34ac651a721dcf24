// nn::IntArg: a layer argument given as one value for both spatial dims or as (height, width),
// like PyTorch's `kernel_size=3` / `kernel_size=(3, 5)`: `Conv2d(3, 16, 3)`, `{.stride = {2, 1}}`.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kiln/shape.h"

namespace kiln::nn {

struct IntArg {
  std::vector<int64_t> values;  // empty: "not given" (e.g. a pool's stride = kernel_size)

  IntArg() = default;
  IntArg(int64_t v) : values{v} {}
  IntArg(std::initializer_list<int64_t> v) : values(v) {}
  IntArg(std::vector<int64_t> v) : values(std::move(v)) {}

  operator IntList() const { return IntList(values); }
  bool empty() const { return values.empty(); }
  // The value for spatial dim i (0: height, 1: width); one value serves both.
  int64_t at(size_t i) const { return values.size() == 1 ? values[0] : values[i]; }
  // "3" for one value, "(3, 5)" for more: how PyTorch prints the argument as given.
  std::string str() const;
  // "(3, 3)": both dims, as PyTorch's convolutions print them.
  std::string pair_str() const { return tuple_str(2); }
  // One entry per spatial dim, as PyTorch's convolutions print them: "(3,)", "(3, 3, 3)".
  std::string tuple_str(size_t dims) const;
};

}  // namespace kiln::nn
