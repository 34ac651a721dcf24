// nn::PadLayer and the padding layers built on it.
#include "kiln/nn/layers/padding.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

PadLayer::PadLayer(std::vector<int64_t> padding, int64_t dims, std::string mode, double value)
    : padding(std::move(padding)), mode(std::move(mode)), value(value), dims_(dims) {
  if (this->padding.size() == 1) this->padding.assign(static_cast<size_t>(2 * dims), this->padding[0]);
  KILN_CHECK(static_cast<int64_t>(this->padding.size()) == 2 * dims, "[padding layer] expected one amount or ",
             2 * dims, " (a before and after pair per padded dim, last dim first), got ", this->padding.size(), ".");
}

Tensor PadLayer::forward(const Tensor& input) {
  KILN_CHECK(input.dim() == dims_ + 1 || input.dim() == dims_ + 2, "[", type_name(), "] expected an input of ",
             dims_ + 1, " or ", dims_ + 2, " dims, got ", input.type_str(), ".");
  return functional::pad(input, padding, mode, value);
}

std::string PadLayer::extra_repr() const {
  std::string s = "(";
  for (size_t i = 0; i < padding.size(); ++i) s += (i ? ", " : "") + std::to_string(padding[i]);
  s += ")";
  if (mode == "constant" && value != 0) s += ", value=" + detail::float_str(value);
  return s;
}

}  // namespace kiln::nn
