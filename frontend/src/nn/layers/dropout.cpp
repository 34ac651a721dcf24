// nn::Dropout.
#include "kiln/nn/layers/dropout.h"

#include "../layer_util.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

Dropout::Dropout(double p) : p(p) {
  KILN_CHECK(p >= 0 && p <= 1, "[Dropout] the dropout probability must lie in [0, 1], got ", p,
             ". Fix: pass e.g. 0.1 or 0.5.");
}

Tensor Dropout::forward(const Tensor& input) {
  return functional::dropout(input, p, is_training());
}

std::string Dropout::extra_repr() const {
  return "p=" + detail::float_str(p) + ", inplace=false";
}

}  // namespace kiln::nn
