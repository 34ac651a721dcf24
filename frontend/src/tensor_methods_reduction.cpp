// The reduction methods of Tensor beyond sum/mean (declared in the runtime's tensor.h).
#include "kiln/tensor_ops/reduction.h"

namespace kiln {

Tensor Tensor::max() const {
  return kiln::max(*this);
}
Tensor Tensor::min() const {
  return kiln::min(*this);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return kiln::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return kiln::argmin(*this, dim, keepdim);
}
Tensor Tensor::prod(IntList dims, bool keepdim) const {
  return kiln::prod(*this, dims, keepdim);
}
Tensor Tensor::amax(IntList dims, bool keepdim) const {
  return kiln::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(IntList dims, bool keepdim) const {
  return kiln::amin(*this, dims, keepdim);
}
Tensor Tensor::all(IntList dims, bool keepdim) const {
  return kiln::all(*this, dims, keepdim);
}
Tensor Tensor::any(IntList dims, bool keepdim) const {
  return kiln::any(*this, dims, keepdim);
}
Tensor Tensor::var(IntList dims, double correction, bool keepdim) const {
  return kiln::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(IntList dims, double correction, bool keepdim) const {
  return kiln::std(*this, dims, correction, keepdim);
}
Tensor Tensor::logsumexp(IntList dims, bool keepdim) const {
  return kiln::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(double p, IntList dims, bool keepdim) const {
  return kiln::norm(*this, p, dims, keepdim);
}

}  // namespace kiln
