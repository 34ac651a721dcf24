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
