// nn::Flatten and nn::Unflatten.
#include "kiln/nn/layers/flatten.h"

namespace kiln::nn {

Tensor Flatten::forward(const Tensor& input) {
  return input.flatten(start_dim, end_dim);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

Unflatten::Unflatten(int64_t dim, std::vector<int64_t> sizes) : dim(dim), sizes(std::move(sizes)) {
  KILN_CHECK(!this->sizes.empty(), "[Unflatten] expected the sizes to split dim ", dim,
             " into, got none. Fix: pass e.g. {2, 5}.");
}

Tensor Unflatten::forward(const Tensor& input) {
  const int64_t d = wrap_dim(dim, input.dim(), "Unflatten");
  Shape shape(input.sizes().begin(), input.sizes().begin() + d);
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      KILN_CHECK(inferred < 0, "[Unflatten] only one size may be -1, got ", shape_str(sizes), ".");
      inferred = static_cast<int64_t>(i);
    } else {
      known *= sizes[i];
    }
  }
  KILN_CHECK(inferred >= 0 ? known > 0 && input.size(d) % known == 0 : known == input.size(d), "[Unflatten] cannot split "
             "dim ", d, " of ", input.type_str(), " (size ", input.size(d), ") into ", shape_str(sizes),
             ". Fix: the sizes must multiply to ", input.size(d), ".");
  for (size_t i = 0; i < sizes.size(); ++i)
    shape.push_back(static_cast<int64_t>(i) == inferred ? input.size(d) / known : sizes[i]);
  for (int64_t k = d + 1; k < input.dim(); ++k) shape.push_back(input.size(k));
  return input.reshape(shape);
}

std::string Unflatten::extra_repr() const {
  std::string s = "dim=" + std::to_string(dim) + ", unflattened_size=(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + (sizes.size() == 1 ? ",)" : ")");
}

}  // namespace kiln::nn
