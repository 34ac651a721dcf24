// nn::IntArg printing.
#include "kiln/nn/int_arg.h"

namespace kiln::nn {

std::string IntArg::str() const {
  if (values.size() == 1) return std::to_string(values[0]);
  return pair_str();
}

std::string IntArg::pair_str() const {
  if (values.empty()) return "None";
  return "(" + std::to_string(at(0)) + ", " + std::to_string(at(1)) + ")";
}

}  // namespace kiln::nn
