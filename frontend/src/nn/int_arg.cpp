// nn::IntArg printing.
#include "kiln/nn/int_arg.h"

namespace kiln::nn {

std::string IntArg::str() const {
  if (values.size() == 1) return std::to_string(values[0]);
  return tuple_str(values.size());
}

std::string IntArg::tuple_str(size_t dims) const {
  if (values.empty()) return "None";
  std::string s = "(";
  for (size_t i = 0; i < dims; ++i) s += (i ? ", " : "") + std::to_string(at(i));
  return s + (dims == 1 ? ",)" : ")");
}

}  // namespace kiln::nn
