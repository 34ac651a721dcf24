// Reductions, with PyTorch's names, defaults and results. An empty `dims` reduces every
// dim; keepdim keeps reduced dims as size 1.
#pragma once

#include <optional>
#include <string_view>
#include <tuple>

#include "kiln/tensor.h"

namespace kiln {

// Integer and bool inputs sum/multiply to int64.
Tensor sum(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, IntList dims = {}, bool keepdim = false);
// Integer inputs give float32 (the default dtype); an empty reduction is nan.
Tensor mean(const Tensor& x, IntList dims = {}, bool keepdim = false);

// The largest/smallest element over dims (nan if any is nan). Reducing an empty dim is
// an error. The gradient is split evenly between tied elements.
Tensor amax(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntList dims = {}, bool keepdim = false);
// max(x)/min(x): over every element, a 0-d tensor (error for an empty tensor).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// max(x, dim)/min(x, dim): (values, indices) along one dim; indices are int64 and point at
// the first extreme element. The gradient flows to that element only.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// The int64 index of the first max/min along `dim`, or into the flattened tensor when
// no dim is given. Not differentiable.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// Bool results: whether all/any elements are non-zero (true/false when empty).
Tensor all(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, IntList dims = {}, bool keepdim = false);

// Variance and standard deviation dividing by max(0, N - correction); correction = 1 is
// the unbiased estimate (PyTorch's default), 0 the population one. A bool passed as
// correction means `unbiased`, as in PyTorch. Floating inputs only.
Tensor var(const Tensor& x, IntList dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, IntList dims = {}, double correction = 1, bool keepdim = false);
// (var, mean) in one call, as torch.var_mean.
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntList dims = {}, double correction = 1,
                                    bool keepdim = false);

// log(sum(exp(x))) over dims, computed without overflow; -inf for an empty reduction.
// Integer inputs give float32.
Tensor logsumexp(const Tensor& x, IntList dims, bool keepdim = false);

// The vector p-norm over dims (every element when empty): p = 2 (default), 1, any p > 0,
// 0 (count of non-zeros) or +-inf (largest/smallest |x|). norm(x, "fro") is the 2-norm.
Tensor norm(const Tensor& x, double p = 2, IntList dims = {}, bool keepdim = false);
Tensor norm(const Tensor& x, std::string_view p, IntList dims = {}, bool keepdim = false);

}  // namespace kiln
