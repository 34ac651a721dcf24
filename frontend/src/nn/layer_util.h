// Helpers shared by the layer implementations: PyTorch's default initialization draws and
// the value formatting of extra_repr().
#pragma once

#include <sstream>
#include <string>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/random.h"

namespace kiln::nn::detail {

// U(-bound, bound) from kiln::default_generator(): PyTorch's kaiming_uniform(a=sqrt(5)) for
// weights and its fan-in bound for biases, both 1/sqrt(fan_in).
inline Tensor uniform_tensor(IntList shape, double bound) {
  NoGradGuard no_grad;
  return kiln::rand(shape) * (2 * bound) - bound;
}

// Layers with floating-point weights refuse integer and bool inputs, as PyTorch does,
// instead of promoting them silently (an int64 image batch is almost always a missing
// conversion and scaling). Lazy layers check before they take shapes from the input.
inline void check_floating_input(const Tensor& input, DType weight_dtype, const char* layer) {
  KILN_CHECK(input.is_floating_point(), "[", layer, "] expected a floating-point input (",
             dtype_name(weight_dtype), ", like its weight), found ", input.type_str(),
             ". Fix: convert it first, e.g. x.to(kiln::k", weight_dtype == DType::Float64 ? "Float64" : "Float32",
             "); integer images usually also need scaling to [0, 1].");
}

inline const char* bool_str(bool b) {
  return b ? "true" : "false";
}

// Python-like float printing: 1e-05, 0.1, 0.5.
inline std::string float_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace kiln::nn::detail
