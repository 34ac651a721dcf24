// Matrix products with PyTorch's rules for 1-D, 2-D and batched operands.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// 1-D @ 1-D: dot; 2-D @ 2-D: matrix product; 1-D operands are promoted to a row/column
// and the added dim removed; rank >= 3: batched, batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias, weight [out, in] as in torch.nn.Linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Batched 3-D x 3-D product with equal batch sizes.
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * input + alpha * (a @ b).
Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1);

}  // namespace kiln
