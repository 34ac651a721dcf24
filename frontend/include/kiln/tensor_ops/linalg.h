// Matrix products with PyTorch's rules for 1-D, 2-D and batched operands.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

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
// beta * input + alpha * bmm(a, b); input broadcasts to [B, N, M].
Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1);
// The outer product of two vectors: out[i][j] = a[i] * b[j].
Tensor outer(const Tensor& a, const Tensor& b);
// The Kronecker product: each element of a scales a copy of b (operands of unequal rank gain
// leading dims of size 1).
Tensor kron(const Tensor& a, const Tensor& b);
// The cross product of 3-vectors along `dim` (the first dim of size 3 when not given); a and
// b broadcast.
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt);
// The sum of the main diagonal of a 2-D tensor.
Tensor trace(const Tensor& x);
// Einstein summation, as torch.einsum / numpy.einsum: "ij,jk->ik", "bhqd,bhkd->bhqk", "ii->i"
// (a repeated subscript takes the diagonal), "...ij,...jk" ('...' broadcasts; without "->"
// the output is the ellipsis dims and the subscripts used once, alphabetically). Subscripts
// are letters. Lowered to diagonal, sum, permute/reshape and one batched matmul per pair of
// operands (left to right), so it is differentiable and compiles to GEMMs.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

}  // namespace kiln
