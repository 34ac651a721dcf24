// Reductions. An empty `dims` reduces every dim.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

Tensor sum(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, IntList dims = {}, bool keepdim = false);

}  // namespace kiln
